use super::*;
use base64::Engine as _;
use pretty_assertions::assert_eq;

fn rewriter() -> SecretRewriter {
    let mut r = SecretRewriter::new();
    r.add_value_secret(
        "API_KEY",
        Secret::new("sk-real-value-123"),
        &["api.example.com".into()],
    )
    .unwrap();
    r.add_value_secret("UNSCOPED", Secret::new("unscoped-value-xyz"), &[])
        .unwrap();
    r.add_file_secret(
        "CERT",
        Secret::new("file-secret-bytes"),
        &["files.example.com".into()],
    )
    .unwrap();
    r
}

#[test]
fn placeholders_materialise_only_toward_the_secrets_hosts() {
    let r = rewriter();
    let text = b"Bearer __ITERION_SECRET_API_KEY__ and __ITERION_SECRET_UNSCOPED__";
    let mut budget = HEADER_GROWTH_BUDGET;
    assert_eq!(
        String::from_utf8(r.materialize_for_host(text, "api.example.com", &mut budget)).unwrap(),
        "Bearer sk-real-value-123 and __ITERION_SECRET_UNSCOPED__"
    );
    assert_eq!(
        String::from_utf8(r.materialize_for_host(text, "v2.api.example.com", &mut budget)).unwrap(),
        "Bearer sk-real-value-123 and __ITERION_SECRET_UNSCOPED__"
    );
    assert_eq!(
        r.materialize_for_host(text, "evil.com", &mut budget),
        text.to_vec()
    );
    assert_eq!(
        r.materialize_for_host(text, "badapi.example.com.evil", &mut budget),
        text.to_vec()
    );
}

#[test]
fn the_growth_budget_leaves_placeholders_opaque_when_exhausted() {
    let mut r = SecretRewriter::new();
    let long = "L".repeat(100);
    r.add_value_secret(
        "LONG",
        Secret::new(long.clone()),
        &["api.example.com".into()],
    )
    .unwrap();
    let text = b"__ITERION_SECRET_LONG__";
    let mut budget = 10;
    assert_eq!(
        r.materialize_for_host(text, "api.example.com", &mut budget),
        text.to_vec()
    );
    let mut budget = HEADER_GROWTH_BUDGET;
    assert_eq!(
        r.materialize_for_host(text, "api.example.com", &mut budget),
        long.into_bytes()
    );
    assert_eq!(budget, HEADER_GROWTH_BUDGET - (100 - text.len()));
}

#[test]
fn real_values_in_any_encoding_toward_another_host_are_exfiltration() {
    let r = rewriter();
    let cases: Vec<Vec<u8>> = vec![
        b"x sk-real-value-123 y".to_vec(),
        base64::engine::general_purpose::STANDARD
            .encode("sk-real-value-123")
            .into_bytes(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode("sk-real-value-123")
            .into_bytes(),
        b"q=sk%2Dreal-value-123".to_vec(),
        b"file-secret-bytes".to_vec(),
    ];
    for c in &cases[..3] {
        assert_eq!(r.exfiltrates_to(c, "evil.com"), Some("API_KEY"));
        assert_eq!(r.exfiltrates_to(c, "api.example.com"), None);
    }
    // percent-encoding as we produce it: '-' is unreserved, so the raw form is what matches.
    assert_eq!(
        r.exfiltrates_to(b"file-secret-bytes", "evil.com"),
        Some("CERT")
    );
    assert_eq!(
        r.exfiltrates_to(b"file-secret-bytes", "files.example.com"),
        None
    );
    // A secret without hosts is not scanned (its value never enters the sandbox).
    assert_eq!(r.exfiltrates_to(b"unscoped-value-xyz", "evil.com"), None);
}

#[test]
fn short_values_are_not_scanned_and_responses_are_redacted() {
    let mut r = rewriter();
    r.add_value_secret("SHORT", Secret::new("abc"), &["a.com".into()])
        .unwrap();
    assert_eq!(r.exfiltrates_to(b"abc", "evil.com"), None);
    assert_eq!(
        String::from_utf8(r.redact_response(b"echo sk-real-value-123")).unwrap(),
        "echo __ITERION_SECRET_API_KEY__"
    );
    assert_eq!(
        r.redact_for_log("k=sk-real-value-123"),
        "k=[REDACTED:API_KEY]"
    );
    assert_eq!(
        format!("{:?}", Secret::new("sk-real-value-123")),
        "Secret(***)"
    );
    assert!(!format!("{r:?}").contains("sk-real"));
}

#[test]
fn model_api_requests_are_recognised_by_host_or_path() {
    for (h, p) in [
        ("api.anthropic.com", "/x"),
        ("europe-west4-aiplatform.googleapis.com", "/"),
        ("myres.openai.azure.com", "/"),
        ("bedrock-runtime.us-east-1.amazonaws.com", "/"),
        ("gw.example.com", "/v1/messages"),
        ("gw.example.com", "/v1/models/x:generateContent?alt=sse"),
    ] {
        assert!(is_model_api_request(h, p), "{h}{p}");
    }
    assert!(!is_model_api_request("api.example.com", "/v1/files"));
    assert!(!is_model_api_request("a.b.openai.azure.com", "/"));
}

#[test]
fn a_bad_secret_name_is_a_typed_error() {
    let mut r = SecretRewriter::new();
    assert_eq!(
        r.add_value_secret("a-b", Secret::new("v"), &[])
            .unwrap_err()
            .code(),
        "NETPROXY_INVALID_SECRET_NAME"
    );
}
