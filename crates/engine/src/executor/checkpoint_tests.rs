use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn workflow() -> Workflow {
    let src = "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool c:\n  command: `true`\n\ntool maybe:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> maybe when \"input.result == 'x'\"\n  a -> b\n  maybe -> done\n  b -> c\n  c -> done\n";
    let compiled = iterion_dsl::compile(src.as_bytes(), &iterion_dsl::CompileOptions::default());
    compiled.workflow.unwrap()
}

/// a → b → c, c failed: each started with an input, a and b finished.
fn ran() -> Checkpoint {
    let mut cp = Checkpoint::default();
    for node in ["a", "b", "c"] {
        let next = NextNode {
            node: node.to_owned(),
            input: json!({ "in": node }),
        };
        cp.record_start(&next);
        cp.next = Some(next);
        if node != "c" {
            cp.outputs.insert(node.to_owned(), json!({ "out": node }));
            cp.last_completed_node = Some(node.to_owned());
        }
    }
    cp.iterations = 3;
    cp
}

#[test]
fn rewinding_to_b_drops_b_and_later_and_keeps_what_ran_before() {
    let mut cp = ran();
    let dropped = cp.rewind_to(&workflow(), "b").unwrap();
    assert_eq!(dropped, vec!["b".to_owned()]);
    assert_eq!(
        cp.next,
        Some(NextNode {
            node: "b".to_owned(),
            input: json!({ "in": "b" })
        })
    );
    assert_eq!(
        cp.outputs,
        BTreeMap::from([("a".to_owned(), json!({ "out": "a" }))])
    );
    assert_eq!(cp.starts.keys().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(cp.last_completed_node, None);
    // The caps still count what ran.
    assert_eq!(cp.iterations, 3);
}

#[test]
fn rewinding_refuses_an_unknown_node_and_one_never_reached() {
    let mut cp = ran();
    let before = cp.clone();
    assert_eq!(
        cp.rewind_to(&workflow(), "nope"),
        Err(RewindError::UnknownNode {
            node: "nope".to_owned()
        })
    );
    assert_eq!(
        cp.rewind_to(&workflow(), "maybe"),
        Err(RewindError::NeverReached {
            node: "maybe".to_owned(),
            reached: "a, b, c".to_owned()
        })
    );
    assert_eq!(cp, before, "a refusal changes nothing");
}

#[test]
fn a_checkpoint_without_start_records_still_reads_and_cannot_be_rewound() {
    let old = json!({"version": 1, "outputs": {}, "loops": {}, "attempts": {}, "iterations": 0, "last_completed_node": null, "next": {"node": "a", "input": {}}});
    let mut cp: Checkpoint = serde_json::from_value(old).unwrap();
    assert!(matches!(
        cp.rewind_to(&workflow(), "a"),
        Err(RewindError::NeverReached { .. })
    ));
}
