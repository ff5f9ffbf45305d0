use pretty_assertions::assert_eq;

use super::*;

/// The whole state machine as a grid: row = from, column = to, `x` = allowed.
#[test]
fn the_status_state_machine_is_exactly_this_table() {
    let grid: Vec<String> = RunStatus::ALL
        .iter()
        .map(|from| {
            let cells: String = RunStatus::ALL
                .iter()
                .map(|to| {
                    if from.can_transition_to(*to) {
                        'x'
                    } else {
                        '.'
                    }
                })
                .collect();
            format!("{:<16} {cells}", from.as_str())
        })
        .collect();
    // columns: queued running finished failed failed_resumable cancelled paused
    assert_eq!(
        grid,
        [
            "queued           xx.x.x.",
            "running          .xxxxxx",
            "finished         ..x....",
            "failed           ...x...",
            "failed_resumable xx..xx.",
            "cancelled        .....x.",
            "paused           .x...xx",
        ]
    );
}

#[test]
fn terminal_statuses_are_the_four_of_sandbox_9_2_and_have_no_way_out_but_resume() {
    let terminal: Vec<_> = RunStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .collect();
    assert_eq!(
        terminal,
        [
            RunStatus::Finished,
            RunStatus::Failed,
            RunStatus::FailedResumable,
            RunStatus::Cancelled
        ]
    );
    let with_exits: Vec<_> = terminal
        .into_iter()
        .filter(|s| !s.successors().is_empty())
        .collect();
    assert_eq!(with_exits, [RunStatus::FailedResumable]);
}

#[test]
fn only_failure_statuses_carry_a_failure_code() {
    let carrying: Vec<_> = RunStatus::ALL
        .into_iter()
        .filter(|s| s.allows_failure())
        .collect();
    assert_eq!(
        carrying,
        [
            RunStatus::Failed,
            RunStatus::FailedResumable,
            RunStatus::Cancelled
        ]
    );
}

#[test]
fn status_spellings_round_trip_through_parse_and_serde() {
    for status in RunStatus::ALL {
        assert_eq!(RunStatus::parse(status.as_str()), Some(status));
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::Value::String(status.as_str().to_owned())
        );
        assert_eq!(status.to_string(), status.as_str());
    }
    assert_eq!(RunStatus::parse("Running"), None);
    assert_eq!(RunStatus::parse(""), None);
}
