//! The node kinds of issue 20 part B, run end to end from the repository's examples: `compute`
//! and a `round_robin` router (07), `human` nodes and an `llm` router against the fake model
//! server (08), `script:` tools inside a docker sandbox (09, and 10's missing interpreter) and
//! node / python scripts on the host (10).
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

const KEY: &str = "sk-test-0123456789abcdef";

/// The text of `examples/NAME`.
fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The nodes started, in order.
fn started(events: &[(String, Value)]) -> Vec<String> {
    events
        .iter()
        .filter(|(k, _)| k == "node_started")
        .map(|(_, d)| d["node"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_round_robin_router_alternates_and_the_compute_node_keeps_the_tally() {
    let env = Env::new();
    env.write("w.iter", &example("07_rotate_tally.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"],
        json!({"seen": ["naming", "tests", "docs"], "summary": "naming, tests, docs", "verdict": "approved", "stop": true})
    );
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        started(&events),
        [
            "alternate",
            "reviewer_a",
            "tally",
            "alternate",
            "reviewer_b",
            "tally"
        ]
    );
    // The first tally saw one review: not yet approved, so the loop went round.
    let finished: Vec<&Value> = events
        .iter()
        .filter(|(k, d)| k == "node_finished" && d["node"] == "tally")
        .map(|(_, d)| &d["output"])
        .collect();
    assert_eq!(
        finished[0],
        &json!({"seen": ["naming", "tests"], "summary": "naming, tests", "verdict": "rejected", "stop": false})
    );
}

#[test]
fn a_compute_expression_that_does_not_evaluate_fails_the_node_naming_the_field() {
    let env = Env::new();
    env.write(
        "w.iter",
        "compute c:\n  expr:\n    joined: \"join(vars.n, ', ')\"\n\nvars:\n  n: int = 3\n\nworkflow w:\n  entry: c\n  c -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failure_code"], json!("EXECUTION_FAILED"));
    assert_eq!(
        summary["message"],
        json!("node \"c\": field \"joined\": join() needs a list (or null), found number")
    );
}

#[test]
fn a_human_node_pauses_the_run_and_resume_answers_it_then_models_route_and_answer() {
    let env = Env::new();
    env.write("w.iter", &example("08_human_gate.iter"));
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::text("{\"selected_route\": \"careful\", \"reasoning\": \"the risk is high\"}"),
            Reply::text("Ship it after a canary."),
        ],
    );
    let model_env = [
        ("ANTHROPIC_API_KEY", KEY.to_owned()),
        ("ITERION_ANTHROPIC_BASE_URL", fake.base_url()),
    ];
    let mut cmd = env.cmd();
    cmd.args(["run", "w.iter", "--sandbox", "none", "--json"]);
    cmd.envs(model_env.iter().map(|(k, v)| (*k, v.as_str())));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "paused");
    let events = env.events(&run);
    assert_eq!(kinds(&events).last(), Some(&"run_paused"));
    assert_eq!(
        first(&events, "run_paused").unwrap(),
        &json!({"node": "approve", "question": "Approve the release \"v2.0\" (risk: high)?\nAnswer with {\"approved\": true or false, \"comment\": \"…\"}."})
    );
    assert!(first(&events, "node_failed").is_none());
    assert!(fake.requests().is_empty(), "no model before the answer");

    // An answer that does not fit the schema fails the node; the run can be resumed again.
    let mut cmd = env.cmd();
    cmd.args(["resume", run.id.as_str(), "--answer", "yes", "--json"]);
    cmd.envs(model_env.iter().map(|(k, v)| (*k, v.as_str())));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failure_code"], json!("SCHEMA_VALIDATION"));
    let mut cmd = env.cmd();
    cmd.args(["resume", run.id.as_str(), "--json"]);
    cmd.envs(model_env.iter().map(|(k, v)| (*k, v.as_str())));
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "asks again: {}",
        stderr_of(&out)
    );

    let mut cmd = env.cmd();
    cmd.args([
        "resume",
        run.id.as_str(),
        "--answer",
        "{\"approved\": true, \"comment\": \"go\"}",
        "--json",
    ]);
    cmd.envs(model_env.iter().map(|(k, v)| (*k, v.as_str())));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"],
        json!({"text": "Ship it after a canary."})
    );
    let run = env.only_run();
    assert_eq!(run.status.as_str(), "finished");
    let events = env.events(&run);
    let approve = events
        .iter()
        .rev()
        .find(|(k, d)| k == "node_finished" && d["node"] == "approve")
        .map(|(_, d)| d["output"].clone());
    assert_eq!(approve, Some(json!({"approved": true, "comment": "go"})));
    let triage = events
        .iter()
        .find(|(k, d)| k == "node_finished" && d["node"] == "triage")
        .map(|(_, d)| d["output"].clone())
        .unwrap();
    assert_eq!(triage["selected_route"], json!("careful"));
    assert_eq!(triage["reasoning"], json!("the risk is high"));
    let taken: Vec<(&str, &str)> = events
        .iter()
        .filter(|(k, _)| k == "edge_selected")
        .map(|(_, d)| (d["from"].as_str().unwrap(), d["to"].as_str().unwrap()))
        .collect();
    assert!(taken.contains(&("triage", "careful")), "{taken:?}");
    assert!(!started(&events).contains(&"quick".to_owned()));

    // The router's model was told its routes; the human stand-in got the rendered instructions.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let system = requests[0].body["system"].to_string();
    assert!(
        system.contains("Send high-risk releases down the careful path.")
            && system.contains("Pick exactly one of these routes: careful, quick."),
        "{system}"
    );
    assert_eq!(
        requests[1].body["messages"][0]["content"]
            .to_string()
            .contains("second opinion on the release v2.0"),
        true,
        "{}",
        requests[1].body
    );
}

#[test]
fn an_llm_router_whose_model_picks_no_route_fails_the_node() {
    let env = Env::new();
    env.write(
        "w.iter",
        "router pick:\n  mode: llm\n  model: \"anthropic/claude-test\"\n\ntool a:\n  command: `echo a`\n\ntool b:\n  command: `echo b`\n\nworkflow w:\n  entry: pick\n  pick -> a\n  pick -> b\n  a -> done\n  b -> done\n",
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![Reply::text("{\"selected_route\": \"done\"}")],
    );
    let out = env
        .cmd()
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failure_code"], json!("EXECUTION_FAILED"));
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("the routing model picked no route of [a, b]"),
        "{summary}"
    );
}

#[test]
fn node_and_python_scripts_read_references_as_data() {
    let env = Env::new();
    env.write("w.iter", &example("10_script_languages.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The hostile value went through both interpreters as one string, quotes and all.
    assert_eq!(
        summary["output"],
        json!({"text": "HELLO ADA \"THE FIRST\" '); PRINT('PWNED", "length": 38})
    );
}

#[test]
fn docker_script_tools_run_inside_the_sandbox_and_shell_references_stay_words() {
    if !docker_or_skip("cli::lang_nodes::docker_script_tools") {
        return;
    }
    let env = Env::new();
    env.write("w.iter", &example("09_script_tools.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox-default-image", IMAGE, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // 18 characters, one word: `$(id)` and the backticks were never run.
    assert_eq!(summary["output"], json!({"chars": 18, "words": 1}));
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("docker")
    );

    // The script runs in the container, not on the host.
    let probe = Env::new();
    probe.write(
        "w.iter",
        "tool where:\n  language: sh\n  script: |\n    if [ -f /.dockerenv ]; then echo '{\"inside\": true}'; else echo '{\"inside\": false}'; fi\n\nworkflow w:\n  entry: where\n  where -> done\n",
    );
    let out = probe
        .cmd()
        .args(["run", "w.iter", "--sandbox-default-image", IMAGE, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"inside": true}));
}

#[test]
fn docker_a_script_whose_interpreter_the_image_lacks_fails_naming_it() {
    if !docker_or_skip("cli::lang_nodes::docker_missing_interpreter") {
        return;
    }
    let env = Env::new();
    env.write("w.iter", &example("10_script_languages.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox-default-image", IMAGE, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["failure_code"], json!("EXECUTION_FAILED"));
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("node could not be started in the sandbox (exit 127)"),
        "{summary}"
    );
}

#[test]
fn a_script_language_outside_the_allow_list_is_refused_before_anything_runs() {
    for (language, code) in [("\"python3; touch pwned\"", "E021"), ("perl", "E020")] {
        let env = Env::new();
        env.write(
            "w.iter",
            &format!("tool t:\n  language: {language}\n  script: |\n    print(1)\n\nworkflow w:\n  entry: t\n  t -> done\n"),
        );
        let out = env
            .cmd()
            .args(["run", "w.iter", "--sandbox", "none"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!("error[{code}]")),
            "{}",
            stderr_of(&out)
        );
        assert!(env.runs().is_empty());
        assert!(!env.path("pwned").exists());
    }
}

#[test]
fn docker_the_human_gate_pauses_a_sandboxed_run_and_its_models_run_in_the_container() {
    if !docker_or_skip("cli::lang_nodes::docker_human_gate") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::lang_nodes::docker_human_gate")
    else {
        return;
    };
    let env = Env::new();
    // An allowlist: the fake model's host (loopback) is added to it as a model provider host.
    env.write(
        "w.iter",
        &example("08_human_gate.iter").replace(
            "  entry: draft\n",
            &format!("  entry: draft\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"),
        ),
    );
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::text("{\"selected_route\": \"careful\", \"reasoning\": \"high\"}"),
            Reply::text("Canary first."),
        ],
    );
    let run_cmd = |args: &[&str]| {
        env.cmd()
            .args(args)
            .env("ITERION_BIN", &static_bin)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
            .output()
            .unwrap()
    };
    let out = run_cmd(&["run", "w.iter", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("docker")
    );
    assert_eq!(
        first(&events, "run_paused").unwrap()["node"],
        json!("approve")
    );
    let out = run_cmd(&[
        "resume",
        run.id.as_str(),
        "--answer",
        "{\"approved\": true, \"comment\": \"go\"}",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"text": "Canary first."}));
    // The model nodes ran their loop in the container, through the runner (the event is
    // recorded once per attempt; the first attempt ran no model).
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    let events = env.events(&env.only_run());
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "sandbox_claw_routed_via_runner")
            .count(),
        1,
        "{events:#?}"
    );
}

#[test]
fn a_round_robin_count_survives_a_pause() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool a:\n  command: `echo '{\"who\": \"a\"}'`\n\ntool b:\n  command: `echo '{\"who\": \"b\"}'`\n\nrouter rr:\n  mode: round_robin\n\nhuman gate:\n  instructions: \"again?\"\n\ncompute check:\n  expr:\n    again: \"input.answer == 'yes'\"\n\nworkflow w:\n  entry: rr\n  rr -> a\n  rr -> b\n  a -> gate\n  b -> gate\n  gate -> check with { answer: \"{{input.answer}}\" }\n  check -> rr as more(3) when again\n  check -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let id = env.only_run().id;
    for answer in ["yes", "no"] {
        let out = env
            .cmd()
            .args(["resume", id.as_str(), "--answer", answer, "--json"])
            .output()
            .unwrap();
        let want = if answer == "yes" { 3 } else { 0 };
        assert_eq!(out.status.code(), Some(want), "{}", stderr_of(&out));
    }
    let events = env.events(&env.only_run());
    let tools: Vec<String> = started(&events)
        .into_iter()
        .filter(|n| n == "a" || n == "b")
        .collect();
    assert_eq!(tools, ["a", "b"]);
}

#[test]
fn a_human_node_publishes_its_answer_as_an_artifact() {
    let env = Env::new();
    env.write(
        "w.iter",
        "schema v:\n  verdict: string\n\nhuman x:\n  output: v\n  publish: decisions\n  instructions: \"decide\"\n\nworkflow w:\n  entry: x\n  x -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let run = env.only_run();
    assert!(first(&env.events(&run), "artifact_published").is_none());
    let out = env
        .cmd()
        .args([
            "resume",
            run.id.as_str(),
            "--answer",
            "{\"verdict\": \"ok\"}",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let events = env.events(&run);
    let published = first(&events, "artifact_published").expect("published");
    assert_eq!(published["name"], json!("decisions"));
    assert_eq!(published["node"], json!("x"));
    assert_eq!(published["value"], json!({"verdict": "ok"}));
}

#[test]
fn a_gated_branch_is_skipped_a_chained_fan_out_joins_and_history_lists_every_round() {
    let env = Env::new();
    env.write("w.iter", &example("15_gated_fanout.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The go branch's `when has_go` did not hold: its key reached the join as null.
    assert_eq!(
        summary["output"],
        json!({"result": "js||generic|[{\"n\":0},{\"n\":1},{\"n\":2}]"})
    );
    let run = env.only_run();
    let mut nodes = started(&env.events(&run));
    // Branches run concurrently: compare each fan-out's branches as a set.
    nodes[2..4].sort();
    nodes[5..7].sort();
    assert_eq!(
        nodes,
        [
            "detect", "scanners", "generic", "js", "reviews", "review_a", "review_b", "gather",
            "count", "count", "count", "report"
        ]
    );
}

#[test]
fn a_loop_cap_written_as_a_template_is_read_at_run_time_and_a_bad_one_fails_typed() {
    let env = Env::new();
    env.write("w.iter", &example("16_planned_rounds.iter"));
    let run = |budget: &str| {
        let out = env
            .cmd()
            .args(["run", "w.iter", "--sandbox", "none", "--json", "--var"])
            .arg(format!("budget={budget}"))
            .output()
            .unwrap();
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), summary)
    };
    // The planner's "3" is the cap: three crossings, and `loop.polish.max` reads it.
    let (code, summary) = run("3");
    assert_eq!(code, Some(0), "{summary}");
    assert_eq!(summary["output"], json!({"round": 3, "of": "3"}));
    let (code, summary) = run("abc");
    assert_eq!(code, Some(1));
    assert_eq!(summary["failure_code"], json!("LOOP_CAP_INVALID"));
    assert_eq!(
        summary["message"],
        json!(
            "node \"polish\": loop \"polish\" cap {{outputs.plan.rounds}} is \"abc\", not an integer"
        )
    );
    for bad in ["0", "100001"] {
        let (code, summary) = run(bad);
        assert_eq!(code, Some(1));
        assert_eq!(summary["failure_code"], json!("LOOP_CAP_INVALID"), "{bad}");
        assert_eq!(
            summary["message"],
            json!(format!(
                "node \"polish\": loop \"polish\" cap {{{{outputs.plan.rounds}}}} is {bad}; it must be from 1 to 100000"
            ))
        );
    }
}

#[test]
fn an_older_join_declaration_gathers_its_branches_and_script_comments_stay_text() {
    let env = Env::new();
    env.write("w.iter", &example("18_older_forms.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The script ran although its comment names `{{input.X}}`, which no input has: a
    // reference there would have failed the node with TEMPLATE_UNRESOLVED.
    assert_eq!(summary["output"], json!({"failed": 1, "passed": 1}));
    let run = env.only_run();
    let events = env.events(&run);
    let gathered = events
        .iter()
        .find(|(k, d)| k == "node_finished" && d["node"] == "gathered")
        .map(|(_, d)| d["output"].clone())
        .expect("the join finished");
    // Upstream's join output: each required node's output (null for the failed branch), and
    // the failed branches under best_effort.
    assert_eq!(gathered["lint"], json!({"ok": true, "warnings": 2}));
    assert_eq!(gathered["unit"], Value::Null);
    assert_eq!(gathered["_failed_branches"][0]["node"], json!("unit"));
    assert_eq!(
        gathered["_failed_branches"][0]["code"],
        json!("EXECUTION_FAILED")
    );
}

#[test]
fn branches_that_all_end_at_done_finish_the_run_together_with_their_keys() {
    let env = Env::new();
    env.write(
        "w.iter",
        "router fan:\n  mode: fan_out_all\n\ntool a:\n  command: `echo '{\"n\": 1}'`\n\ntool b:\n  command: `sleep 0.2; echo '{\"n\": 2}'`\n\n\
         workflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> done with { first: \"{{outputs.a.n}}\" }\n  b -> done with { second: \"{{outputs.b.n}}\" }\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Both branches ran (the slow one too) and the run's output holds both keys.
    assert_eq!(summary["output"], json!({"first": 1, "second": 2}));
    let run = env.only_run();
    let mut nodes = started(&env.events(&run));
    nodes[1..3].sort();
    assert_eq!(nodes, ["fan", "a", "b", "fan_at_done"]);
}

#[test]
fn a_named_fail_node_ends_the_run_with_its_code_and_a_resumable_one_resumes_at_its_gate() {
    let env = Env::new();
    env.write("w.iter", &example("20_named_failures.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = summary["run_id"].as_str().unwrap().to_owned();
    assert_eq!(summary["status"], json!("failed_resumable"));
    assert_eq!(summary["failure_code"], json!("DECLARED_FAILURE_RESUMABLE"));
    assert_eq!(summary["declared_code"], json!("WORKSPACE_NOT_READY"));
    // The message is rendered from the gate's output and the run's id.
    assert_eq!(
        summary["message"],
        json!(format!(
            "node \"not_ready\": WORKSPACE_NOT_READY: no ready.txt among the 1 files of the workspace: create it, then resume run {run_id}"
        ))
    );
    let run = env.only_run();
    let failed: Vec<Value> = env
        .events(&run)
        .into_iter()
        .filter(|(k, _)| k == "node_failed")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["node"], json!("not_ready"));
    assert_eq!(failed[0]["declared_code"], json!("WORKSPACE_NOT_READY"));

    // Resumed once the workspace is ready: the gate runs again, the fail node does not.
    env.write("ready.txt", "");
    let out = env
        .cmd()
        .args(["resume", run_id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"value": "built"}));
    assert_eq!(
        started(&env.events(&env.only_run())),
        ["gate", "not_ready", "gate", "build"]
    );
}

#[test]
fn a_final_named_fail_node_leaves_nothing_to_resume() {
    let env = Env::new();
    env.write("w.iter", &example("20_named_failures.iter"));
    let out = env
        .cmd()
        .args([
            "run",
            "w.iter",
            "--sandbox",
            "none",
            "--json",
            "--var",
            "refuse=true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], json!("failed"));
    assert_eq!(summary["failure_code"], json!("DECLARED_FAILURE"));
    assert_eq!(summary["declared_code"], json!("REFUSED_BY_OPERATOR"));
    let run_id = summary["run_id"].as_str().unwrap();
    let out = env.cmd().args(["resume", run_id]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("[RESUME_INVALID]: run ")
            && stderr_of(&out).contains(" is failed;"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn the_run_namespace_reports_the_budget_to_expressions_and_commands() {
    let env = Env::new();
    env.write("w.iter", &example("21_budget_gauge.iter"));
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = env.only_run();
    let gauge = env
        .events(&run)
        .into_iter()
        .find(|(k, d)| k == "node_finished" && d["node"] == "gauge")
        .map(|(_, d)| d["output"].clone())
        .expect("the gauge finished");
    // The gauge is the second counted node; the caps are the budget's.
    assert_eq!(
        gauge,
        json!({"iterations": 2, "left": 8, "duration_cap": 3600, "cost_cap": 2.5,
               "token_cap": null, "cost": null, "late": false})
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = summary["output"]["line"].as_str().unwrap();
    assert!(line.starts_with("3 of 10 iterations, "), "{line}");
}

/// `examples/DIR`'s files (and its subdirectories'), copied into the environment.
pub(crate) fn example_dir(env: &Env, dir: &str) {
    fn copy(env: &Env, from: &std::path::Path, to: &str) {
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap();
            let name = if to.is_empty() {
                name.to_owned()
            } else {
                format!("{to}/{name}")
            };
            if path.is_dir() {
                copy(env, &path, &name);
            } else {
                env.write(&name, &std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(dir);
    copy(env, &root, "");
}

#[test]
fn a_fan_out_each_runs_its_branch_per_item_in_dependency_order_and_collects_lists() {
    let env = Env::new();
    example_dir(&env, "22_per_item");
    let out = env
        .cmd()
        .args(["run", "main.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Lists in ticket order; "b" waited for "a", so with one slot it ran last; each child got
    // its own ticket through the subbot's `with`.
    assert_eq!(
        summary["output"],
        json!({
            "ids": ["b", "a", "c"],
            "lines": ["ticket b was number 3", "ticket a was number 1", "ticket c was number 2"],
            "worked": 3
        })
    );
    let runs = env.runs();
    // The parent and one child run per ticket.
    assert_eq!(runs.len(), 4, "{runs:#?}");
    let run = runs
        .into_iter()
        .find(|r| r.id.to_string() == summary["run_id"].as_str().unwrap_or_default())
        .expect("the parent run");
    let events = env.events(&run);
    let branches: Vec<String> = events
        .iter()
        .filter(|(k, d)| k == "node_started" && d["node"] == "work")
        .map(|(_, d)| d["branch"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(branches, ["work[1]", "work[2]", "work[0]"]);
}

#[test]
fn a_fan_out_each_refuses_a_dependency_cycle_and_a_value_that_is_not_a_list() {
    let env = Env::new();
    let src = |tickets: &str| {
        format!(
            "tool plan:\n  command: `printf '{{\"t\":{tickets}}}'`\n\nrouter each:\n  mode: fan_out_each\n  over: \"{{{{outputs.plan.t}}}}\"\n  key: id\n  depends_on: deps\n\n\
             tool work:\n  command: `true`\n\ncompute collect:\n  await: wait_all\n  expr:\n    n: \"length(outputs.work)\"\n\n\
             workflow w:\n  entry: plan\n  plan -> each\n  each -> work\n  work -> collect\n  collect -> done\n"
        )
    };
    for (tickets, message) in [
        (
            r#"[{"id":"a","deps":["b"]},{"id":"b","deps":["a"]}]"#,
            "node \"each\": the items' deps form a cycle among a, b",
        ),
        (
            r#"{"id":"a"}"#,
            "node \"each\": over of \"each\": {{outputs.plan.t}} is map, not a list",
        ),
        (
            r#"[{"id":"a","deps":["z"]}]"#,
            "node \"each\": item 0 depends on id \"z\", which no item has",
        ),
    ] {
        env.write("w.iter", &src(tickets));
        let out = env
            .cmd()
            .args(["run", "w.iter", "--sandbox", "none", "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            summary["failure_code"],
            json!("EXECUTION_FAILED"),
            "{tickets}"
        );
        assert_eq!(summary["message"], json!(message), "{tickets}");
    }
}

#[test]
fn a_fan_out_each_over_an_empty_list_goes_straight_to_its_join() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool plan:\n  command: `echo '{\"t\": []}'`\n\nrouter each:\n  mode: fan_out_each\n  over: \"{{outputs.plan.t}}\"\n\n\
         tool work:\n  command: `echo '{\"v\": {{outputs.each.item}}}'`\n\ncompute collect:\n  await: best_effort\n  expr:\n    got: \"input.v\"\n\n\
         workflow w:\n  entry: plan\n  plan -> each\n  each -> work\n  work -> collect with { v: \"{{outputs.work.v}}\" }\n  collect -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"got": []}));
    assert_eq!(
        started(&env.events(&env.only_run())),
        ["plan", "each", "collect"]
    );
}

#[test]
fn an_edge_from_a_fan_out_straight_to_its_join_arrives_at_once_with_its_mapping() {
    let env = Env::new();
    env.write(
        "w.iter",
        "tool seed:\n  command: `echo '{\"note\": \"seeded\"}'`\n\nrouter fan:\n  mode: fan_out_all\n\n\
         tool build:\n  command: `echo '{\"ok\": true}'`\n\ncompute join:\n  await: wait_all\n  expr:\n    note: \"input.note\"\n    built: \"input.built\"\n\n\
         workflow w:\n  entry: seed\n  seed -> fan\n  fan -> build\n  fan -> join with { note: \"{{outputs.seed.note}}\" }\n  build -> join with { built: \"{{outputs.build.ok}}\" }\n  join -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["output"], json!({"note": "seeded", "built": true}));
    assert_eq!(
        started(&env.events(&env.only_run())),
        ["seed", "fan", "build", "join"]
    );
}
