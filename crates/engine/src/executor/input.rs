//! Node input and reference resolution (DSL.md §4.1, §4.2, §5.3, §5.6 step 5).
//!
//! [`View`] resolves a `{{…}}` reference against the run state without copying it; the
//! functions below build a node's input map from the `with` mappings of the edges into it.

use std::collections::BTreeMap;

use iterion_dsl::ir::{self, Delivery, Mapping, MappingValue, Workflow};
use iterion_dsl::template::{self, Namespace, Reference};
use serde_json::{Map, Number, Value};

use crate::executor::checkpoint::Checkpoint;
use crate::executor::graph::Graph;
use crate::records::secrets::secret_placeholder;

/// Everything a reference can name. `input` is the current node's input, or inside a `with`
/// mapping the source node's output.
pub(crate) struct View<'s> {
    pub vars: &'s Value,
    pub input: &'s Value,
    pub outputs: &'s BTreeMap<String, Value>,
    pub artifacts: &'s BTreeMap<String, Value>,
    /// `{NAME: {path, mime, size, sha256}}` ([`crate::sandbox::attachments::scope`]).
    pub attachments: &'s Value,
    /// Every output so far of each node in a loop ([`Checkpoint::history`]).
    pub history: &'s BTreeMap<String, Vec<Value>>,
    pub loops: &'s Value,
    /// The `run` namespace ([`crate::executor::ctx::Ctx::run_scope`]).
    pub run: &'s Value,
    pub secrets: &'s [ir::Secret],
}

fn walk<'v>(mut cur: &'v Value, path: &[String]) -> Option<&'v Value> {
    for seg in path {
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

impl View<'_> {
    /// The value of a reference; `None` when it cannot be resolved (§4.2).
    pub(crate) fn resolve(&self, r: &Reference) -> Option<Value> {
        let path = r.path.as_slice();
        match r.namespace {
            Namespace::Vars => walk(self.vars, path).cloned(),
            Namespace::Input => walk(self.input, path).cloned(),
            Namespace::Outputs => {
                let (node, rest) = path.split_first()?;
                let output = self.outputs.get(node)?;
                // `outputs.N.history`: N's outputs so far, unless its output has that field.
                if let Some((field, tail)) = rest.split_first()
                    && field == ir::HISTORY_FIELD
                    && output.get(ir::HISTORY_FIELD).is_none()
                    && let Some(all) = self.history.get(node)
                {
                    return walk(&Value::Array(all.clone()), tail).cloned();
                }
                walk(output, rest).cloned()
            }
            Namespace::Artifacts => {
                let (name, rest) = path.split_first()?;
                walk(self.artifacts.get(name)?, rest).cloned()
            }
            Namespace::Attachments => {
                let (name, rest) = path.split_first()?;
                let info = self.attachments.get(name)?;
                match rest {
                    [] => info.get("path").cloned(),
                    [field] => info.get(field).cloned(),
                    _ => None,
                }
            }
            Namespace::Loop => walk(self.loops, path).cloned(),
            Namespace::Run => walk(self.run, path).cloned(),
            Namespace::Secrets => {
                let (name, rest) = path.split_first()?;
                let secret = self.secrets.iter().find(|s| &s.name == name)?;
                match (&secret.delivery, rest) {
                    (Delivery::Value, []) => Some(Value::String(secret_placeholder(name))),
                    (Delivery::File { mount_path, .. }, []) => {
                        Some(Value::String(mount_path.clone()))
                    }
                    (Delivery::File { mount_path, .. }, [p]) if p == "path" => {
                        Some(Value::String(mount_path.clone()))
                    }
                    _ => None,
                }
            }
        }
    }
}

/// The `loop` namespace: every declared loop with its `iteration`, `max` and `previous_output`.
/// A templated cap's `max` is the value its edge last resolved, or before any crossing its
/// template resolved now (`input` empty); `null` when that does not resolve.
pub(crate) fn loop_scope(graph: &Graph, state: &Checkpoint, vars: &Value) -> Value {
    let mut map = Map::new();
    for (name, info) in &graph.loops {
        let st = state.loops.get(name);
        let max = match (&info.cap_template, st.and_then(|s| s.max)) {
            (None, _) => Value::from(info.cap),
            (Some(_), Some(resolved)) => Value::from(resolved),
            (Some(text), None) => resolve_cap(
                name,
                text,
                vars,
                &Value::Null,
                &state.outputs,
                &state.artifacts,
            )
            .map_or(Value::Null, Value::from),
        };
        map.insert(
            name.clone(),
            serde_json::json!({
                "iteration": st.map_or(0, |s| s.iteration),
                "max": max,
                "previous_output": st.map_or(Value::Null, |s| s.previous_output.clone()),
            }),
        );
    }
    Value::Object(map)
}

/// One `with` value (§4.2): exactly one reference keeps its JSON type (`null` when unresolved);
/// any other template text renders as text, an unresolved reference staying as written;
/// numbers and booleans keep their type (D13).
pub(crate) fn render_mapping(m: &Mapping, view: &View<'_>) -> Value {
    match &m.value {
        MappingValue::Int(i) => Value::Number(Number::from(*i)),
        MappingValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        MappingValue::Bool(b) => Value::Bool(*b),
        MappingValue::Template(text) => {
            let tpl = template::parse(text);
            match tpl.single_reference() {
                Some(r) => view.resolve(r).unwrap_or(Value::Null),
                None => Value::String(tpl.render_text(|r| view.resolve(r))),
            }
        }
    }
}

/// Shared inputs of the input builders.
pub(crate) struct InputCtx<'a> {
    pub wf: &'a Workflow,
    pub graph: &'a Graph,
    pub vars: &'a Value,
    /// The `run` namespace.
    pub run: Value,
    pub attachments: &'a Value,
}

impl InputCtx<'_> {
    /// Renders the mapping of edge `edge` against its source's latest output.
    pub(crate) fn edge_mapping(
        &self,
        state: &Checkpoint,
        loops: &Value,
        edge: usize,
    ) -> Option<Map<String, Value>> {
        let e = self.wf.edges.get(edge)?;
        let source_output = state.outputs.get(&e.from)?;
        let view = View {
            vars: self.vars,
            input: source_output,
            outputs: &state.outputs,
            artifacts: &state.artifacts,
            attachments: self.attachments,
            history: &state.history,
            loops,
            run: &self.run,
            secrets: &self.wf.secrets,
        };
        Some(
            e.with
                .iter()
                .map(|m| (m.key.clone(), render_mapping(m, &view)))
                .collect(),
        )
    }

    /// The input of a node that is not a join (§5.3 steps 2–3): the mappings of every edge into
    /// it whose source has produced an output, in declaration order, then the taken edge's again
    /// so that they win; for the entry node with no key at all, the map of all vars.
    ///
    /// A router starts from the output of the node it was reached from (the taken edge's
    /// source), so its conditions read what its predecessor produced; the mappings are applied
    /// over it (issue 19: a router after a node got an empty input).
    pub(crate) fn node_input(&self, state: &Checkpoint, node: &str, taken: Option<usize>) -> Value {
        let loops = loop_scope(self.graph, state, self.vars);
        let mut map = Map::new();
        let is_router = matches!(
            self.wf.node(node).map(|n| &n.body),
            Some(ir::NodeBody::Router(_))
        );
        if is_router
            && let Some(Value::Object(from)) = taken
                .and_then(|i| self.wf.edges.get(i))
                .and_then(|e| state.outputs.get(&e.from))
        {
            map.extend(from.clone());
        }
        for &i in self.graph.incoming(node) {
            if let Some(m) = self.edge_mapping(state, &loops, i) {
                map.extend(m);
            }
        }
        if let Some(m) = taken.and_then(|i| self.edge_mapping(state, &loops, i)) {
            map.extend(m);
        }
        if map.is_empty() && node == self.wf.entry {
            return self.vars.clone();
        }
        Value::Object(map)
    }

    /// A join's input (§5.6 step 5): every `with` key of every edge into it set to `null`, then
    /// the arrived branches' rendered mappings in the order of the router's edges, then
    /// `_failed_branches` under `best_effort`.
    pub(crate) fn join_input(
        &self,
        join: &str,
        arrivals: impl IntoIterator<Item = Map<String, Value>>,
        failed_branches: Option<Vec<Value>>,
    ) -> Value {
        let mut map = Map::new();
        for &i in self.graph.incoming(join) {
            for m in self.wf.edges.get(i).map_or(&[][..], |e| e.with.as_slice()) {
                map.insert(m.key.clone(), Value::Null);
            }
        }
        for arrival in arrivals {
            map.extend(arrival);
        }
        if let Some(failed) = failed_branches {
            map.insert("_failed_branches".to_owned(), Value::Array(failed));
        }
        Value::Object(map)
    }
}

impl InputCtx<'_> {
    /// The input of `fan_out_each` join `join`: each `with` key of the edges into it as a list
    /// in item order (`null` for an item that did not arrive), and `_failed_branches` under
    /// `best_effort`.
    pub(crate) fn join_input_each(
        &self,
        join: &str,
        arrivals: &[Option<Map<String, Value>>],
        failed_branches: Option<Vec<Value>>,
    ) -> Value {
        let mut map = Map::new();
        for &i in self.graph.incoming(join) {
            for m in self.wf.edges.get(i).map_or(&[][..], |e| e.with.as_slice()) {
                let values = arrivals
                    .iter()
                    .map(|a| {
                        a.as_ref()
                            .and_then(|m2| m2.get(&m.key))
                            .cloned()
                            .unwrap_or(Value::Null)
                    })
                    .collect();
                map.insert(m.key.clone(), Value::Array(values));
            }
        }
        if let Some(failed) = failed_branches {
            map.insert("_failed_branches".to_owned(), Value::Array(failed));
        }
        Value::Object(map)
    }
}

/// A templated loop cap that did not resolve to an integer in `1..=MAX_LOOP_CAP`: the run fails
/// with `LOOP_CAP_INVALID`.
#[derive(Debug)]
pub(crate) struct CapInvalid(pub String);

/// One owner of the templated-cap rule: the template's single reference must hold an integer
/// (a JSON integer, or a string of decimal digits: tool and `with` values are often text) from
/// 1 to [`iterion_dsl::ir::MAX_LOOP_CAP`].
pub(crate) fn resolve_cap(
    loop_name: &str,
    text: &str,
    vars: &Value,
    input: &Value,
    outputs: &std::collections::BTreeMap<String, Value>,
    artifacts: &std::collections::BTreeMap<String, Value>,
) -> Result<u32, CapInvalid> {
    use iterion_dsl::ir::MAX_LOOP_CAP;
    let tpl = iterion_dsl::template::parse(text);
    let Some(r) = tpl.single_reference() else {
        return Err(CapInvalid(format!(
            "loop \"{loop_name}\" cap {text:?} is not one reference"
        )));
    };
    let empty_history = std::collections::BTreeMap::new();
    let view = View {
        vars,
        input,
        outputs,
        artifacts,
        attachments: &Value::Null,
        history: &empty_history,
        loops: &Value::Null,
        run: &Value::Null,
        secrets: &[],
    };
    let value = view.resolve(r);
    let number = match &value {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if (1..=i64::from(MAX_LOOP_CAP)).contains(&n) => {
            Ok(u32::try_from(n).unwrap_or(MAX_LOOP_CAP))
        }
        Some(n) => Err(CapInvalid(format!(
            "loop \"{loop_name}\" cap {} is {n}; it must be from 1 to {MAX_LOOP_CAP}",
            r.text
        ))),
        None => {
            let found = match &value {
                Some(Value::String(s)) => format!("{:?}", s.chars().take(64).collect::<String>()),
                Some(v) => iterion_dsl::expr::type_name(v).to_owned(),
                None => "unresolved".to_owned(),
            };
            Err(CapInvalid(format!(
                "loop \"{loop_name}\" cap {} is {found}, not an integer",
                r.text
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn secrets() -> Vec<ir::Secret> {
        vec![
            ir::Secret {
                name: "tok".to_owned(),
                value: "${TOK}".to_owned(),
                delivery: Delivery::Value,
                hosts: vec![],
                optional: false,
            },
            ir::Secret {
                name: "key".to_owned(),
                value: "${KEY}".to_owned(),
                delivery: Delivery::File {
                    mount_path: "/run/iterion/secrets/key".to_owned(),
                    env: None,
                },
                hosts: vec![],
                optional: false,
            },
        ]
    }

    #[test]
    fn references_resolve_against_every_namespace() {
        let vars = json!({"a": {"b": 1}});
        let input = json!({"x": null});
        let outputs = BTreeMap::from([("n".to_owned(), json!({"f": [1]}))]);
        let loops = json!({"l": {"iteration": 2}});
        let secrets = secrets();
        let attachments = json!({"spec": {"path": "/run/iterion/attachments/spec/a.pdf", "mime": "application/pdf", "size": 4, "sha256": "ab"}});
        let view = View {
            vars: &vars,
            input: &input,
            outputs: &outputs,
            artifacts: &BTreeMap::new(),
            attachments: &attachments,
            history: &BTreeMap::new(),
            loops: &loops,
            run: &serde_json::json!({"id": "r1"}),
            secrets: &secrets,
        };
        let tpl = template::parse(
            "{{vars.a.b}}|{{input.x}}|{{input.y}}|{{outputs.n.f}}|{{outputs.m}}|{{loop.l.iteration}}|{{run.id}}|{{secrets.tok}}|{{secrets.key}}|{{secrets.key.path}}|{{secrets.tok.path}}|{{attachments.spec}}|{{attachments.spec.size}}|{{attachments.spec.mime}}|{{attachments.other}}",
        );
        let got: Vec<Option<Value>> = tpl.references().map(|r| view.resolve(r)).collect();
        assert_eq!(
            got,
            vec![
                Some(json!(1)),
                Some(Value::Null),
                None,
                Some(json!([1])),
                None,
                Some(json!(2)),
                Some(json!("r1")),
                Some(json!("__ITERION_SECRET_tok__")),
                Some(json!("/run/iterion/secrets/key")),
                Some(json!("/run/iterion/secrets/key")),
                None,
                Some(json!("/run/iterion/attachments/spec/a.pdf")),
                Some(json!(4)),
                Some(json!("application/pdf")),
                None,
            ]
        );
    }

    #[test]
    fn with_values_keep_types_or_render_as_text() {
        let vars = json!({});
        let input = json!({"n": 3, "s": "x", "l": [1, "a"]});
        let outputs = BTreeMap::new();
        let loops = json!({});
        let attachments = json!({});
        let view = View {
            vars: &vars,
            input: &input,
            outputs: &outputs,
            artifacts: &BTreeMap::new(),
            attachments: &attachments,
            history: &BTreeMap::new(),
            loops: &loops,
            run: &serde_json::json!({"id": "r"}),
            secrets: &[],
        };
        let m = |v: MappingValue| Mapping {
            key: "k".to_owned(),
            value: v,
        };
        let t = |s: &str| m(MappingValue::Template(s.to_owned()));
        let got = vec![
            render_mapping(&t("{{input.n}}"), &view),
            render_mapping(&t("{{input.l}}"), &view),
            render_mapping(&t("{{input.missing}}"), &view),
            render_mapping(&t("n={{input.n}} {{input.missing}}"), &view),
            render_mapping(&t("{{ input.s }}!"), &view),
            render_mapping(&m(MappingValue::Int(4)), &view),
            render_mapping(&m(MappingValue::Float(0.5)), &view),
            render_mapping(&m(MappingValue::Bool(true)), &view),
        ];
        assert_eq!(
            got,
            vec![
                json!(3),
                json!([1, "a"]),
                Value::Null,
                json!("n=3 {{input.missing}}"),
                json!("x!"),
                json!(4),
                json!(0.5),
                json!(true),
            ]
        );
    }
}
