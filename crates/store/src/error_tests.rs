use std::path::PathBuf;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

fn id() -> RunId {
    RunId::parse("0190b4c6-1d2e-7f00-8000-000000000001").unwrap()
}

fn file() -> DbLocation {
    DbLocation::File(PathBuf::from("/home/ada/.iterion/iterion.db"))
}

/// One of each variant, with its code and message: codes never change once shipped, and the
/// messages are the user's only guide to the fix.
#[test]
fn every_variant_has_its_code_and_a_message_that_says_what_to_do() {
    let io = || Box::new(std::io::Error::other("disk on fire")) as BackendError;
    let errors = vec![
        Error::InvalidRunId { value: "r1".into() },
        Error::RunNotFound { run_id: id() },
        Error::InvalidRunRef {
            value: "../x".into(),
        },
        Error::NoRunMatches {
            reference: "ff".into(),
        },
        Error::AmbiguousRunRef {
            prefix: "0190".into(),
            candidates: vec![id(), id()],
            more: 3,
        },
        Error::RunActive {
            run_id: id(),
            status: RunStatus::Running,
        },
        Error::RunExists { run_id: id() },
        Error::ParentNotFound {
            run_id: id(),
            parent_run_id: id(),
        },
        Error::TrustRaised {
            run_id: id(),
            parent_run_id: id(),
        },
        Error::Conflict {
            run_id: id(),
            expected: 3,
            actual: 4,
        },
        Error::IllegalTransition {
            run_id: id(),
            from: RunStatus::Finished,
            to: RunStatus::Running,
        },
        Error::ImmutableField {
            run_id: id(),
            field: "trust",
        },
        Error::FailureOnStatus {
            run_id: id(),
            status: RunStatus::Running,
        },
        Error::NonUtf8Path {
            run_id: id(),
            field: "file_path",
        },
        Error::InvalidLeaseTtl {
            ttl: Duration::ZERO,
            max_days: 365,
        },
        Error::LeaseHeld {
            run_id: id(),
            holder: "host-b:7".into(),
            expires_at: Timestamp::from_millis(1_793_525_400_000),
        },
        Error::LeaseLost {
            run_id: id(),
            holder: "host-a:1".into(),
        },
        Error::HomeUnset,
        Error::CreateDir {
            path: PathBuf::from("/ro/.iterion"),
            source: std::io::Error::other("read-only"),
        },
        Error::CannotOpen {
            db: file(),
            source: io(),
        },
        Error::Locked {
            db: file(),
            busy_timeout: Duration::from_secs(5),
        },
        Error::Corrupt {
            db: file(),
            detail: "file is not a database".into(),
        },
        Error::SchemaTooNew {
            db: file(),
            found: 9,
            supported: 1,
        },
        Error::CorruptRecord {
            db: file(),
            column: "runs.status",
            key: id().to_string(),
            detail: "unknown status \"zombie\"".into(),
        },
        Error::Encode {
            run_id: id(),
            field: "vars",
            source: serde_json::from_str::<i32>("x").unwrap_err(),
        },
        Error::Backend {
            db: DbLocation::Memory,
            op: "appending events",
            source: io(),
        },
        Error::ShuttingDown {
            db: DbLocation::Memory,
        },
    ];
    let got: Vec<(&str, String)> = errors.iter().map(|e| (e.code(), e.to_string())).collect();
    let r = "0190b4c6-1d2e-7f00-8000-000000000001";
    let f = "/home/ada/.iterion/iterion.db";
    let want: Vec<(&str, String)> = vec![
        ("STORE_INVALID_RUN_ID", "\"r1\" is not a run id (expected a UUID such as 0190b4c6-1d2e-7f00-8000-000000000001)".into()),
        ("STORE_RUN_NOT_FOUND", format!("no run {r} in the store; `iterion ps --all` lists the runs there are")),
        ("STORE_INVALID_RUN_REF", "\"../x\" does not name a run: give a run id, the start of one (hex digits and `-`), or `last` for the newest run; `iterion ps --all` lists them".into()),
        ("STORE_NO_RUN_MATCHES", "no run matches \"ff\"; `iterion ps --all` lists the runs there are".into()),
        ("STORE_AMBIGUOUS_RUN_REF", format!("\"0190\" is ambiguous: it starts 5 run ids ({r}, {r} and 3 more); type more of the id")),
        ("STORE_RUN_ACTIVE", format!("run {r} is running; it cannot be removed while it may be executing (wait for it, or stop it first)")),
        ("STORE_RUN_EXISTS", format!("run {r} already exists; let the store generate the id")),
        ("STORE_PARENT_NOT_FOUND", format!("cannot create run {r}: its parent run {r} is not in the store")),
        ("STORE_TRUST_RAISED", format!("cannot create run {r} trusted: its parent run {r} is untrusted")),
        ("STORE_CONFLICT", format!("run {r} changed since it was loaded (expected version 3, found 4); reload it and apply the change again")),
        ("STORE_ILLEGAL_TRANSITION", format!("run {r} cannot go from finished to running")),
        ("STORE_IMMUTABLE_FIELD", format!("run {r}: trust is fixed when the run is created and cannot be saved changed")),
        ("STORE_FAILURE_ON_STATUS", format!("run {r}: a failure code or message is only kept on failed, failed_resumable or cancelled runs, not on running; clear it when the run moves on")),
        ("STORE_NON_UTF8_PATH", format!("run {r}: file_path is not valid UTF-8; use a UTF-8 path")),
        ("STORE_INVALID_LEASE_TTL", "a lease must last between 1 ms and 365 days, not 0ns".into()),
        ("STORE_LEASE_HELD", format!("run {r} is leased to host-b:7 until 2026-11-01T09:30:00.000Z; it is being executed elsewhere")),
        ("STORE_LEASE_LOST", format!("host-a:1 no longer holds the lease on run {r}; stop executing it")),
        ("STORE_HOME_UNSET", "cannot place the run store: set ITERION_HOME (or HOME, for the default ~/.iterion)".into()),
        ("STORE_CREATE_DIR", "cannot create /ro/.iterion: read-only; create it or set ITERION_HOME to a writable directory".into()),
        ("STORE_CANNOT_OPEN", format!("cannot open the run store {f}: disk on fire; check its permissions or set ITERION_HOME")),
        ("STORE_LOCKED", format!("the run store {f} is locked by another process (waited 5s); let the other iterion finish, or stop it, and try again")),
        ("STORE_CORRUPT", format!("the run store {f} is corrupt (file is not a database); move it aside (e.g. `mv {f} {f}.corrupt`) and iterion starts an empty store")),
        ("STORE_SCHEMA_TOO_NEW", format!("the run store {f} has schema version 9, newer than this iterion understands (1); upgrade iterion, or point ITERION_HOME elsewhere")),
        ("STORE_CORRUPT_RECORD", format!("the run store {f} holds a bad runs.status for {r}: unknown status \"zombie\"")),
        ("STORE_ENCODE", format!("run {r}: vars cannot be encoded as JSON: expected value at line 1 column 1")),
        ("STORE_BACKEND", "the run store :memory: failed while appending events: disk on fire".into()),
        ("STORE_SHUTTING_DOWN", "the run store :memory: is shutting down with the runtime; the operation did not run".into()),
    ];
    assert_eq!(got, want);
}
