//! Cursors, MCP servers, presets and attachments: what compiles to what, and every diagnostic
//! of docs/language.md's sections on them.
use iterion_dsl::ir::{McpTransport, NodeBody};
use iterion_dsl::{CompileOptions, Compiled, compile};
use pretty_assertions::assert_eq;

fn compiled(src: &str) -> Compiled {
    compile(
        src.as_bytes(),
        &CompileOptions {
            ask_user_in_sandbox: false,
        },
    )
}

/// `(code, line)` of every diagnostic.
fn codes(src: &str) -> Vec<(String, u32)> {
    compiled(src)
        .diagnostics
        .into_iter()
        .map(|d| (d.code.as_str().to_owned(), d.span.line))
        .collect()
}

const CURSORS: &str = r#"cursor ambition:
  description: "scope"
  values:
    cautious: "Stay put."
    ambitious: "Go far."

cursor depth:
  bands:
    "0.0..0.5": "Skim."
    "0.51..1.0": "Trace everything."

agent a:
  model: "anthropic/claude-sonnet-4-5"
  system: "You review."
  user: "go"
  cursors:
    enabled: true
    depth: 0.7
    ambition: ambitious

workflow w:
  entry: a
  a -> done
"#;

#[test]
fn cursors_compile_and_calibrate_sorted_by_name() {
    let out = compiled(CURSORS);
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    let NodeBody::Agent(a) = &wf.node("a").unwrap().body else {
        panic!("agent")
    };
    let section = iterion_dsl::ir::calibration(&wf.cursors, &a.cursors, str::to_owned)
        .unwrap()
        .unwrap();
    assert_eq!(
        section,
        "## Calibration\n\n**ambition:** Go far.\n**depth:** Trace everything."
    );
    // An enum cursor takes a number by position; a number is clamped.
    let amb = &wf.cursors["ambition"];
    assert_eq!(amb.fragment("0.2"), Some("Stay put."));
    assert_eq!(amb.fragment("1"), Some("Go far."));
    assert_eq!(wf.cursors["depth"].fragment("7"), Some("Trace everything."));
    assert_eq!(amb.fragment("reckless"), None);
}

#[test]
fn cursors_disabled_or_absent_add_nothing() {
    let src = CURSORS.replace("enabled: true", "enabled: false");
    let wf = compiled(&src).workflow.unwrap();
    let NodeBody::Agent(a) = &wf.node("a").unwrap().body else {
        panic!("agent")
    };
    assert!(a.cursors.is_empty());
}

#[test]
fn cursor_diagnostics() {
    // C084: not in the enum, out of range, no band.
    let bad = CURSORS.replace("ambition: ambitious", "ambition: reckless");
    assert_eq!(codes(&bad), vec![("C084".into(), 19)]);
    let bad = CURSORS.replace("depth: 0.7", "depth: 1.5");
    assert_eq!(codes(&bad), vec![("C084".into(), 18)]);
    // ${VAR} is resolved at launch, not checked.
    let env = CURSORS.replace("depth: 0.7", "depth: \"${DEPTH}\"");
    assert_eq!(codes(&env), vec![]);
    // C083 (warning): an undeclared cursor.
    let unknown = CURSORS.replace("depth: 0.7", "rigor: 0.7");
    assert_eq!(codes(&unknown), vec![("C083".into(), 18)]);
    assert!(compiled(&unknown).workflow.is_some());
    // C085: both forms, neither, overlap, out of range.
    let both = CURSORS.replace("  bands:\n", "  values:\n    x: \"y\"\n  bands:\n");
    assert_eq!(codes(&both)[0], ("C085".into(), 7));
    let overlap = CURSORS.replace("0.51..1.0", "0.4..1.0");
    assert_eq!(codes(&overlap), vec![("C085".into(), 10)]);
    let outside = CURSORS.replace("0.51..1.0", "0.51..1.5");
    assert_eq!(codes(&outside), vec![("C085".into(), 10)]);
    let neither = "cursor c:\n  description: \"d\"\n\n".to_owned() + CURSORS;
    assert_eq!(codes(&neither), vec![("C085".into(), 1)]);
    // C086: a duplicate.
    let dup = CURSORS
        .to_owned()
        .replace("cursor depth:", "cursor ambition:");
    assert_eq!(codes(&dup)[0], ("C086".into(), 7));
}

const MCP: &str = r#"mcp_server tools:
  transport: stdio
  command: "/usr/local/bin/tiny-mcp"
  args: ["--quiet"]
  env:
    MODE: "demo"

mcp_server docs:
  command: "docs-mcp"

mcp_server remote:
  transport: http
  url: "http://127.0.0.1:9/mcp"

agent a:
  model: "anthropic/claude-sonnet-4-5"
  user: "go"
  mcp:
    servers: [tools]

agent b:
  model: "anthropic/claude-sonnet-4-5"
  user: "go"
  mcp:
    inherit: false

agent c:
  model: "anthropic/claude-sonnet-4-5"
  user: "go"
  mcp:
    disable: [docs]

workflow w:
  entry: a
  mcp:
    servers: [docs]
  a -> b
  b -> c
  c -> done
"#;

#[test]
fn mcp_servers_compile_and_nodes_resolve_their_list() {
    let out = compiled(MCP);
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    let tools = &wf.mcp_servers["tools"];
    assert_eq!(tools.transport, McpTransport::Stdio);
    assert_eq!(tools.command.as_deref(), Some("/usr/local/bin/tiny-mcp"));
    assert_eq!(tools.args, vec!["--quiet".to_owned()]);
    assert_eq!(tools.env["MODE"], "demo");
    assert_eq!(wf.mcp_servers["remote"].transport, McpTransport::Http);
    let servers = |id: &str| match &wf.node(id).unwrap().body {
        NodeBody::Agent(a) => a.mcp_servers.clone(),
        _ => panic!("agent"),
    };
    assert_eq!(servers("a"), vec!["tools".to_owned(), "docs".to_owned()]);
    assert_eq!(servers("b"), Vec::<String>::new());
    assert_eq!(servers("c"), Vec::<String>::new());
    assert!(wf.uses_mcp());
}

#[test]
fn mcp_tool_entries_name_tools_of_a_server_the_node_gets() {
    let listed = MCP.replace(
        "  user: \"go\"\n  mcp:\n    servers: [tools]",
        "  user: \"go\"\n  tools: [bash, mcp.tools.greet, mcp.docs.search, mcp.tools.greet]\n  mcp:\n    servers: [tools]",
    );
    let out = compiled(&listed);
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    let NodeBody::Agent(a) = &wf.node("a").unwrap().body else {
        panic!("agent")
    };
    let refs: Vec<(&str, &str)> = a
        .mcp_tools
        .iter()
        .map(|r| (r.server.as_str(), r.tool.as_str()))
        .collect();
    assert_eq!(refs, vec![("tools", "greet"), ("docs", "search")]);
    // A server the node does not get (b opts out of the workflow's), or a malformed entry.
    let foreign = MCP.replace(
        "  mcp:\n    inherit: false",
        "  tools: [mcp.docs.search]\n  mcp:\n    inherit: false",
    );
    assert_eq!(codes(&foreign), vec![("C135".into(), 24)]);
    let malformed = listed.replace("mcp.docs.search", "mcp.docs");
    assert_eq!(codes(&malformed), vec![("C135".into(), 18)]);
}

#[test]
fn mcp_diagnostics() {
    let dup = MCP.replace("mcp_server docs:", "mcp_server tools:");
    assert!(codes(&dup).contains(&("C024".into(), 8)));
    let no_command = MCP.replace("  command: \"docs-mcp\"\n", "  args: [\"x\"]\n");
    assert_eq!(codes(&no_command), vec![("C025".into(), 8)]);
    let http_command = MCP.replace(
        "  url: \"http://127.0.0.1:9/mcp\"\n",
        "  url: \"http://x\"\n  command: \"c\"\n",
    );
    assert_eq!(codes(&http_command), vec![("C025".into(), 14)]);
    let bad_transport = MCP.replace("transport: http", "transport: carrier_pigeon");
    assert_eq!(codes(&bad_transport), vec![("C025".into(), 12)]);
    let auth = MCP.replace(
        "  url: \"http://127.0.0.1:9/mcp\"\n",
        "  url: \"http://x\"\n  auth:\n    type: \"basic\"\n",
    );
    assert_eq!(codes(&auth), vec![("C038".into(), 14)]);
    let unknown = MCP.replace("servers: [tools]", "servers: [tols]");
    assert_eq!(codes(&unknown), vec![("C087".into(), 19)]);
    let autoload = MCP.replace("    inherit: false", "    autoload_project: true");
    assert_eq!(codes(&autoload), vec![("E012".into(), 25)]);
}

const PRESETS: &str = r#"vars:
  topic: string = "general"
  depth: int = 1

presets:
  quick:
    topic: "rate limiting"
  deep:
    topic: "consensus"
    depth: 3

tool t:
  command: "echo {{vars.topic}}"

workflow w:
  entry: t
  t -> done
"#;

#[test]
fn presets_compile_to_var_values() {
    let out = compiled(PRESETS);
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    assert_eq!(wf.presets["deep"]["depth"], serde_json::json!(3));
    assert_eq!(
        wf.presets["quick"]["topic"],
        serde_json::json!("rate limiting")
    );
}

#[test]
fn preset_diagnostics() {
    let unknown = PRESETS.replace("    depth: 3", "    width: 3");
    assert_eq!(codes(&unknown), vec![("C070".into(), 10)]);
    let mismatch = PRESETS.replace("    depth: 3", "    depth: \"three\"");
    assert_eq!(codes(&mismatch), vec![("C071".into(), 10)]);
    let dup = PRESETS.replace("  deep:", "  quick:");
    assert_eq!(codes(&dup), vec![("C072".into(), 8)]);
}

const ATTACHMENTS: &str = r#"attachments:
  logo: image
  spec: file
    description: "The spec"
    accept_mime: ["application/pdf", "text/*"]
    required: true

tool t:
  command: "true"

workflow w:
  entry: t
  attachments:
    notes: file
  t -> done
"#;

#[test]
fn attachments_compile() {
    let out = compiled(ATTACHMENTS);
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    let names: Vec<&str> = wf.attachments.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, vec!["logo", "spec", "notes"]);
    assert!(wf.attachments[1].required);
    assert_eq!(wf.attachments[0].kind, "image");
}

#[test]
fn attachment_diagnostics() {
    let dup = ATTACHMENTS.replace("    notes: file", "    logo: file");
    assert_eq!(codes(&dup), vec![("C050".into(), 14)]);
    let var = format!("vars:\n  logo: string\n\n{ATTACHMENTS}");
    assert_eq!(codes(&var), vec![("C051".into(), 5)]);
    let mime = ATTACHMENTS.replace("\"text/*\"", "\"pdf\"");
    assert_eq!(codes(&mime), vec![("C052".into(), 5)]);
    let kind = ATTACHMENTS.replace("logo: image", "logo: video");
    assert_eq!(codes(&kind), vec![("E020".into(), 2)]);
}
