use super::*;
use pretty_assertions::assert_eq;

fn inputs(pairs: &[(&str, &str)]) -> SchedulingInputs {
    let mut inputs = SchedulingInputs::default();
    for (key, value) in pairs {
        let slot = match *key {
            "req_cpu" => &mut inputs.requests_cpu,
            "req_mem" => &mut inputs.requests_memory,
            "lim_cpu" => &mut inputs.limits_cpu,
            "lim_mem" => &mut inputs.limits_memory,
            "spread" => &mut inputs.spread,
            other => panic!("unknown key {other}"),
        };
        *slot = Some((*value).to_owned());
    }
    inputs
}

/// The policy's summary, or the variable and value the error names.
type Outcome = std::result::Result<String, (String, String)>;

fn outcome(pairs: &[(&str, &str)]) -> Outcome {
    SchedulingPolicy::parse(&inputs(pairs))
        .map(|policy| policy.summary())
        .map_err(|error| match error {
            Error::InvalidSetting {
                variable, value, ..
            } => (variable.to_owned(), value),
            other => (other.code().to_owned(), other.to_string()),
        })
}

#[test]
fn a_policy_table_parses_or_names_the_bad_variable() {
    let ok = |s: &str| Ok(s.to_owned());
    let bad = |var: &str, value: &str| Err((var.to_owned(), value.to_owned()));
    let rows: Vec<(&[(&str, &str)], Outcome)> = vec![
        (&[], ok("requests none; limits none; spread none")),
        (
            &[("req_cpu", "500m"), ("req_mem", "512Mi")],
            ok("requests cpu=500m memory=512Mi; limits none; spread none"),
        ),
        (
            &[
                ("req_cpu", " 0.5 "),
                ("lim_cpu", "500m"),
                ("req_mem", "1G"),
                ("lim_mem", "1e9"),
            ],
            ok("requests cpu=0.5 memory=1G; limits cpu=500m memory=1e9; spread none"),
        ),
        (
            &[
                ("req_mem", "1Gi"),
                ("lim_mem", "2Gi"),
                ("spread", "hostname"),
            ],
            ok("requests memory=1Gi; limits memory=2Gi; spread kubernetes.io/hostname"),
        ),
        (
            &[("spread", "topology.kubernetes.io/zone")],
            ok("requests none; limits none; spread topology.kubernetes.io/zone"),
        ),
        (
            &[("spread", "OFF")],
            ok("requests none; limits none; spread none"),
        ),
        (
            &[("spread", "none")],
            ok("requests none; limits none; spread none"),
        ),
        (
            &[("req_cpu", "")],
            ok("requests none; limits none; spread none"),
        ),
        (
            &[("spread", "zone")],
            bad(ITERION_SANDBOX_K8S_SPREAD, "zone"),
        ),
        (
            &[("spread", "Bad_Prefix/zone")],
            bad(ITERION_SANDBOX_K8S_SPREAD, "Bad_Prefix/zone"),
        ),
        (&[("spread", "a/")], bad(ITERION_SANDBOX_K8S_SPREAD, "a/")),
        (
            &[("req_mem", "500m")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_MEMORY, "500m"),
        ),
        (
            &[("req_cpu", "1Gi")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "1Gi"),
        ),
        (
            &[("req_cpu", "2k")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "2k"),
        ),
        (
            &[("req_cpu", "0")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "0"),
        ),
        (
            &[("req_mem", "0Mi")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_MEMORY, "0Mi"),
        ),
        (
            &[("req_cpu", "-1")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "-1"),
        ),
        (
            &[("req_cpu", "abc")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "abc"),
        ),
        (
            &[("req_cpu", "1.2.3")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_CPU, "1.2.3"),
        ),
        (
            &[("req_mem", "1Xi")],
            bad(ITERION_SANDBOX_K8S_REQUESTS_MEMORY, "1Xi"),
        ),
        (
            &[("lim_cpu", "1")],
            bad(ITERION_SANDBOX_K8S_LIMITS_CPU, "1"),
        ),
        (
            &[("lim_mem", "1Gi")],
            bad(ITERION_SANDBOX_K8S_LIMITS_MEMORY, "1Gi"),
        ),
        (
            &[("req_cpu", "2"), ("lim_cpu", "1500m")],
            bad(ITERION_SANDBOX_K8S_LIMITS_CPU, "1500m"),
        ),
        (
            &[("req_mem", "1Gi"), ("lim_mem", "1G")],
            bad(ITERION_SANDBOX_K8S_LIMITS_MEMORY, "1G"),
        ),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(pairs, _)| (pairs.to_vec(), outcome(pairs)))
        .collect();
    let want: Vec<_> = rows
        .into_iter()
        .map(|(pairs, outcome)| (pairs.to_vec(), outcome))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_bad_limit_says_what_is_wanted() {
    let error =
        SchedulingPolicy::parse(&inputs(&[("req_cpu", "2"), ("lim_cpu", "1")])).unwrap_err();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "ITERION_SANDBOX_K8S_LIMITS_CPU=\"1\": want a limit at least its request".to_owned()
        )
    );
}

#[test]
fn quantities_compare_in_base_units() {
    let value = |resource, text| parse_quantity(resource, text).map(|q| q.value);
    assert_eq!(
        [
            value(Resource::Cpu, "250m"),
            value(Resource::Cpu, "2"),
            value(Resource::Memory, "1Ki"),
            value(Resource::Memory, "1k"),
            value(Resource::Memory, "2e3"),
        ],
        [Ok(0.25), Ok(2.0), Ok(1024.0), Ok(1000.0), Ok(2000.0)]
    );
}
