use super::*;
use pretty_assertions::assert_eq;

fn parse(cli: Cli, text: &str) -> Vec<DelegateEvent> {
    let mut p = StreamParser::new(cli);
    let mut events: Vec<DelegateEvent> = text.lines().flat_map(|l| p.line(l)).collect();
    events.extend(p.finish());
    events
}

fn task(cli: Cli) -> DelegateTask {
    DelegateTask {
        cli,
        model: "m-1".into(),
        system: Some("Be brief.".into()),
        prompt: "Do it.".into(),
        tools: vec![Tool::Bash, Tool::WriteFile],
        max_turns: 7,
        reasoning_effort: Some("high".into()),
        max_tokens: Some(900),
        start: Start::Fresh,
        base_url: "http://127.0.0.1:9/v1".into(),
        credential: Credential::Key("__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__".into()),
        config_dir: "/tmp/iterion-delegate/claude_code".into(),
        sandboxed: true,
        mcp_servers: Vec::new(),
    }
}

fn env_of<'a>(inv: &'a Invocation, key: &str) -> Option<&'a str> {
    inv.env
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn claude_gets_only_the_nodes_tools_its_config_dir_and_the_prompt_on_stdin() {
    let inv = invocation(&task(Cli::ClaudeCode));
    let argv = inv.argv.join(" ");
    assert!(
        argv.starts_with(
            "claude -p --output-format stream-json --input-format stream-json --verbose --setting-sources user --strict-mcp-config --model m-1 --max-turns 7 --tools Bash,Write --allowedTools Bash,Write --effort high --append-system-prompt"
        ),
        "{argv}"
    );
    assert!(
        !argv.contains("Do it."),
        "the prompt is not in argv: {argv}"
    );
    let line: Value = serde_json::from_slice(&inv.stdin).unwrap();
    assert_eq!(
        line,
        json!({"type": "user", "message": {"role": "user", "content": "Do it."}})
    );
    assert_eq!(
        env_of(&inv, "CLAUDE_CONFIG_DIR"),
        Some("/tmp/iterion-delegate/claude_code")
    );
    assert_eq!(
        env_of(&inv, "ANTHROPIC_API_KEY"),
        Some("__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__")
    );
    assert_eq!(
        env_of(&inv, "NO_PROXY"),
        Some(""),
        "a loopback model goes through the proxy"
    );
    let mut remote = task(Cli::ClaudeCode);
    remote.base_url = "https://api.anthropic.com".into();
    assert_eq!(
        env_of(&invocation(&remote), "NO_PROXY"),
        None,
        "the sandbox's own stays"
    );
    assert_eq!(env_of(&inv, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"), Some("900"));
    assert_eq!(
        env_of(&inv, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"),
        Some("1")
    );
}

#[test]
fn claude_with_no_tools_gets_none_and_a_session_is_resumed_or_forked() {
    let mut t = task(Cli::ClaudeCode);
    t.tools.clear();
    t.start = Start::Fork("s-1".into());
    let argv = invocation(&t).argv;
    let at = argv.iter().position(|a| a == "--tools").unwrap();
    assert_eq!(argv[at + 1], "");
    assert!(!argv.contains(&"--allowedTools".to_owned()));
    assert!(argv.ends_with(&["--resume".into(), "s-1".into(), "--fork-session".into()]));
    t.start = Start::Resume("s-1".into());
    assert!(
        invocation(&t)
            .argv
            .ends_with(&["--resume".into(), "s-1".into()])
    );
}

#[test]
fn codex_reads_its_provider_from_the_per_run_config_and_runs_without_its_own_sandbox_inside_ours() {
    let inv = invocation(&task(Cli::Codex));
    assert_eq!(
        inv.argv.join(" "),
        "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -m m-1 -c model_reasoning_effort=\"high\" -c model_max_output_tokens=900 -"
    );
    assert_eq!(
        String::from_utf8(inv.stdin.clone()).unwrap(),
        "Be brief.\n\nDo it."
    );
    let (name, config) = &inv.config_files[0];
    assert_eq!(name, "config.toml");
    assert!(
        config.contains("base_url = \"http://127.0.0.1:9/v1\""),
        "{config}"
    );
    assert!(config.contains("env_key = \"OPENAI_API_KEY\""), "{config}");
    assert!(
        !config.contains("__ITERION_SECRET"),
        "no credential in the file"
    );
    assert_eq!(
        env_of(&inv, "TMPDIR"),
        Some("/tmp/iterion-delegate/claude_code/tmp")
    );
    assert_eq!(
        env_of(&inv, CODEX_KEY_VAR),
        Some("__ITERION_SECRET_ITERION_GATEWAY_ANTHROPIC__")
    );
    let mut t = task(Cli::Codex);
    t.sandboxed = false;
    t.start = Start::Resume("th-1".into());
    let argv = invocation(&t).argv.join(" ");
    assert!(
        argv.starts_with(
            "codex exec resume --json --skip-git-repo-check -c sandbox_mode=\"workspace-write\" -c approval_policy=\"never\""
        ),
        "{argv}"
    );
    assert!(argv.ends_with(" th-1 -"), "{argv}");
}

#[test]
fn a_toml_string_cannot_break_out_of_the_config() {
    let config = codex_config("http://h/\"\nmodel_provider = \"evil", false);
    let parsed_lines: Vec<&str> = config
        .lines()
        .filter(|l| l.starts_with("model_provider"))
        .collect();
    assert_eq!(parsed_lines, vec!["model_provider = \"iterion\""]);
}

// Lines as claude 2.1.328 printed them against the fake Messages server (trimmed).
const CLAUDE: &str = r#"{"type":"system","subtype":"init","session_id":"s-1","tools":["Bash"]}
{"type":"assistant","message":{"content":[{"id":"toolu_1_0","input":{"command":"echo hi > made.txt"},"name":"Bash","type":"tool_use"}],"id":"msg_1","model":"claude-test","stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1_0","type":"tool_result","content":"(Bash completed with no output)","is_error":false}]},"parent_tool_use_id":null,"session_id":"s-1"}
not json at all
{"type":"assistant","message":{"content":[{"text":"{\"answer\": \"done\"}","type":"text"}],"id":"msg_2","model":"claude-test","usage":{"input_tokens":10,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"result","subtype":"success","is_error":false,"result":"{\"answer\": \"done\"}","session_id":"s-1","total_cost_usd":0.00028,"usage":{"input_tokens":20,"output_tokens":10}}"#;

#[test]
fn claude_stream_json_gives_turns_tool_calls_the_session_and_the_answer() {
    let events = parse(Cli::ClaudeCode, CLAUDE);
    assert_eq!(
        events,
        vec![
            DelegateEvent::Session("s-1".into()),
            DelegateEvent::Turn {
                turn: 1,
                model: Some("claude-test".into()),
                stop_reason: None,
                input_tokens: Some(10),
                output_tokens: Some(1)
            },
            DelegateEvent::ToolCall {
                turn: 1,
                tool: "Bash".into(),
                input: r#"{"command":"echo hi > made.txt"}"#.into(),
                result: Some("(Bash completed with no output)".into()),
                is_error: false,
                exit_code: None
            },
            DelegateEvent::Turn {
                turn: 2,
                model: Some("claude-test".into()),
                stop_reason: None,
                input_tokens: Some(10),
                output_tokens: Some(1)
            },
            DelegateEvent::Session("s-1".into()),
            DelegateEvent::Final(Final {
                text: r#"{"answer": "done"}"#.into(),
                is_error: false,
                subtype: Some("success".into()),
                input_tokens: 20,
                output_tokens: 10,
                cost_usd: Some(0.00028)
            }),
        ]
    );
}

// Lines as codex 0.169.0 printed them against the fake Responses server (trimmed).
const CODEX: &str = r#"{"type":"thread.started","thread_id":"th-1"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'echo hi'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'echo hi'","aggregated_output":"hi\n","exit_code":3,"status":"failed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"{\"answer\": \"done\"}"}}
{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":0,"output_tokens":10}}"#;

#[test]
fn codex_json_gives_the_command_with_its_exit_code_the_thread_and_the_last_message() {
    let events = parse(Cli::Codex, CODEX);
    assert_eq!(events.len(), 4, "{events:#?}");
    assert_eq!(events[0], DelegateEvent::Session("th-1".into()));
    assert_eq!(
        events[1],
        DelegateEvent::ToolCall {
            turn: 1,
            tool: "command_execution".into(),
            input: r#"{"command":"bash -lc 'echo hi'"}"#.into(),
            result: Some("hi\n".into()),
            is_error: true,
            exit_code: Some(3)
        }
    );
    let DelegateEvent::Final(end) = &events[3] else {
        panic!("{events:#?}")
    };
    assert_eq!(
        (
            end.text.as_str(),
            end.is_error,
            end.input_tokens,
            end.output_tokens
        ),
        (r#"{"answer": "done"}"#, false, 20, 10)
    );
}

#[test]
fn a_call_without_a_result_is_still_reported_when_the_stream_ends() {
    let mut p = StreamParser::new(Cli::ClaudeCode);
    let _ = p.line(CLAUDE.lines().nth(1).unwrap());
    let end = p.finish();
    assert!(
        matches!(&end[..], [DelegateEvent::ToolCall { result: None, tool, .. }] if tool == "Bash"),
        "{end:#?}"
    );
}

#[test]
fn a_login_gives_the_cli_no_key_and_its_credential_file_only_when_one_is_given() {
    for cli in [Cli::ClaudeCode, Cli::Codex] {
        let mut t = task(cli);
        t.credential = Credential::Login {
            file: Some("{\"login\":1}".into()),
        };
        let inv = invocation(&t);
        assert_eq!(env_of(&inv, "ANTHROPIC_API_KEY"), None);
        assert_eq!(env_of(&inv, CODEX_KEY_VAR), None);
        let names: Vec<&str> = inv.config_files.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&cli.login_file()), "{names:?}");
        t.credential = Credential::Login { file: None };
        let inv = invocation(&t);
        assert!(!inv.config_files.iter().any(|(n, _)| n == cli.login_file()));
        if cli == Cli::Codex {
            let config = &inv.config_files[0].1;
            assert!(config.contains("requires_openai_auth = true"), "{config}");
            assert!(!config.contains("env_key"), "{config}");
        }
    }
}

#[test]
fn mcp_servers_are_written_to_one_file_per_cli_and_a_hostile_name_cannot_add_keys() {
    let servers = vec![McpServer {
        name: "iterion\"]\nmodel_provider = \"evil".into(),
        command: "/run/iterion/bin/iterion".into(),
        args: vec!["__mcp-ask-user".into()],
        env: vec![("TOKEN".into(), "t\"\nx = 1".into())],
        only: None,
    }];
    let mut t = task(Cli::ClaudeCode);
    t.mcp_servers = servers.clone();
    let inv = invocation(&t);
    let at = inv.argv.iter().position(|a| a == "--mcp-config").unwrap();
    assert_eq!(
        inv.argv[at + 1],
        "/tmp/iterion-delegate/claude_code/mcp.json"
    );
    let (_, json_text) = inv
        .config_files
        .iter()
        .find(|(n, _)| n == "mcp.json")
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(json_text).unwrap();
    let server = &v["mcpServers"]["iterion\"]\nmodel_provider = \"evil"];
    assert_eq!(server["args"], json!(["__mcp-ask-user"]));
    assert!(inv.argv.contains(&"--strict-mcp-config".to_owned()));
    assert_eq!(mcp_config(Cli::ClaudeCode, &[]), None);
    let mut t = task(Cli::Codex);
    t.mcp_servers = servers;
    let inv = invocation(&t);
    let config = &inv
        .config_files
        .iter()
        .find(|(n, _)| n == "config.toml")
        .unwrap()
        .1;
    let lines: Vec<&str> = config
        .lines()
        .filter(|l| l.starts_with("model_provider"))
        .collect();
    assert_eq!(lines, vec!["model_provider = \"iterion\""], "{config}");
    assert!(!config.lines().any(|l| l.starts_with("x = ")), "{config}");
    assert!(config.contains("args = [\"__mcp-ask-user\"]"), "{config}");
    // codex runs the servers' tools without an approval (`approval_policy = "never"` would
    // refuse them otherwise).
    assert!(
        config.contains("default_tools_approval_mode = \"approve\""),
        "{config}"
    );
}

#[test]
fn claude_runs_the_given_mcp_servers_tools_without_a_prompt_and_a_hostile_name_adds_no_rule() {
    let server = |name: &str| McpServer {
        name: name.into(),
        command: "/run/iterion/bin/iterion".into(),
        args: vec!["__mcp-ask-user".into()],
        env: vec![],
        only: None,
    };
    let mut t = task(Cli::ClaudeCode);
    t.tools = vec![];
    t.mcp_servers = vec![server("iterion"), server("x,Bash"), server("y(Bash)")];
    let inv = invocation(&t);
    let at = inv.argv.iter().position(|a| a == "--allowedTools").unwrap();
    assert_eq!(inv.argv[at + 1], "mcp__iterion");
}

/// A node naming `mcp.SERVER.TOOL` entries allows only those tools: one claude rule per tool (a
/// hostile tool name adds none), codex's `enabled_tools` (quoted: it cannot add keys).
#[test]
fn named_mcp_tools_are_the_only_ones_allowed_on_either_cli() {
    let server = McpServer {
        name: "srv".into(),
        command: "/bin/srv".into(),
        args: vec![],
        env: vec![],
        only: Some(vec![
            "echo".into(),
            "a,Bash".into(),
            "x\"]\nmodel = \"evil".into(),
        ]),
    };
    let mut t = task(Cli::ClaudeCode);
    t.tools = vec![];
    t.mcp_servers = vec![server.clone()];
    let inv = invocation(&t);
    let at = inv.argv.iter().position(|a| a == "--allowedTools").unwrap();
    assert_eq!(inv.argv[at + 1], "mcp__srv__echo");
    let mut t = task(Cli::Codex);
    t.mcp_servers = vec![server];
    let inv = invocation(&t);
    let config = &inv
        .config_files
        .iter()
        .find(|(n, _)| n == "config.toml")
        .unwrap()
        .1;
    let parsed: toml::Value = toml::from_str(config).unwrap();
    assert_eq!(
        parsed["mcp_servers"]["srv"]["enabled_tools"],
        toml::Value::Array(vec![
            "echo".into(),
            "a,Bash".into(),
            "x\"]\nmodel = \"evil".into()
        ]),
        "{config}"
    );
    assert!(
        !config.lines().any(|l| l.starts_with("model = ")),
        "{config}"
    );
}
