use super::*;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use pretty_assertions::assert_eq;

const VALUE: &[u8] = b"sk-Real/Value+0123456789?xyz";

fn hex_upper(v: &[u8]) -> Vec<u8> {
    hex(v).to_ascii_uppercase()
}

fn pct_all(v: &[u8], upper: bool) -> Vec<u8> {
    v.iter()
        .flat_map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
            .into_bytes()
        })
        .collect()
}

fn pct_some(v: &[u8]) -> Vec<u8> {
    v.iter()
        .enumerate()
        .flat_map(|(i, b)| {
            if i % 3 == 1 {
                format!("%{b:02x}").into_bytes()
            } else {
                vec![*b]
            }
        })
        .collect()
}

/// `od -An -tx1`-like: two hex digits per byte, `sep` between, a line break every `line` bytes.
fn spaced_hex(v: &[u8], sep: &str, line: usize) -> Vec<u8> {
    let mut out = String::new();
    for (i, b) in v.iter().enumerate() {
        if line > 0 && i > 0 && i % line == 0 {
            out.push('\n');
        }
        out.push_str(sep);
        out.push_str(&format!("{b:02x}"));
    }
    out.into_bytes()
}

/// `["s","k",…]`.
fn json_chars(v: &[u8]) -> Vec<u8> {
    let parts: Vec<String> = v
        .iter()
        .map(|b| format!("\"{}\"", char::from(*b)))
        .collect();
    format!("[{}]", parts.join(", ")).into_bytes()
}

/// Cut into 5-byte labels joined by dots.
fn labels(v: &[u8]) -> Vec<u8> {
    v.chunks(5).collect::<Vec<_>>().join(&b'.')
}

fn escaped(v: &[u8], f: impl Fn(u8) -> String) -> Vec<u8> {
    v.iter().map(|b| f(*b)).collect::<String>().into_bytes()
}

fn rev(v: &[u8]) -> Vec<u8> {
    v.iter().rev().copied().collect()
}

/// Every encoding class, with the value at each base64 alignment (prefixes of 0, 1, 2 bytes).
pub(crate) fn encoded_cases(v: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut cases = vec![
        ("raw".to_owned(), v.to_vec()),
        ("upper".to_owned(), v.to_ascii_uppercase()),
        ("reversed".to_owned(), rev(v)),
        ("hex".to_owned(), hex(v)),
        ("HEX".to_owned(), hex_upper(v)),
        ("hex of reversed".to_owned(), hex(&rev(v))),
        ("pct upper".to_owned(), pct_all(v, true)),
        ("pct lower".to_owned(), pct_all(v, false)),
        ("pct partial".to_owned(), pct_some(v)),
        ("pct twice".to_owned(), pct_all(&pct_all(v, true), true)),
        ("od hex".to_owned(), spaced_hex(v, " ", 16)),
        ("colon hex".to_owned(), spaced_hex(v, ":", 0)),
        ("json chars".to_owned(), json_chars(v)),
        ("dns labels".to_owned(), labels(v)),
        (
            "\\u escapes".to_owned(),
            escaped(v, |b| format!("\\u{b:04x}")),
        ),
        (
            "\\x escapes".to_owned(),
            escaped(v, |b| format!("\\x{b:02X}")),
        ),
        ("html decimal".to_owned(), escaped(v, |b| format!("&#{b};"))),
        ("html hex".to_owned(), escaped(v, |b| format!("&#x{b:x};"))),
        (
            "escaped slashes".to_owned(),
            escaped(v, |b| {
                if b == b'/' {
                    "\\/".into()
                } else {
                    char::from(b).to_string()
                }
            }),
        ),
    ];
    for k in 0..3 {
        let mut input = b"ab".to_vec();
        input.truncate(k);
        input.extend_from_slice(v);
        input.extend_from_slice(&b"tail"[..k]);
        for (name, enc) in [
            ("b64", STANDARD.encode(&input)),
            ("b64 nopad", STANDARD_NO_PAD.encode(&input)),
            ("b64url", URL_SAFE.encode(&input)),
            ("b64url nopad", URL_SAFE_NO_PAD.encode(&input)),
        ] {
            cases.push((format!("{name} at {k}"), enc.clone().into_bytes()));
            cases.push((format!("{name} at {k} reversed"), rev(enc.as_bytes())));
            cases.push((format!("{name} at {k} pct"), pct_all(enc.as_bytes(), false)));
        }
        cases.push((
            format!("b64 of reversed at {k}"),
            STANDARD.encode(rev(&input)).into_bytes(),
        ));
    }
    cases
}

#[test]
fn every_encoding_is_found_and_redacted_whole() {
    let forms = SecretForms::new(&[b"unrelated-secret-zz".as_slice(), VALUE]);
    for (name, enc) in encoded_cases(VALUE) {
        let hay = [b"x=".as_slice(), &enc, b"&y=1"].concat();
        assert_eq!(forms.find(&hay, |_| true), Some(1), "{name}");
        let out = forms.redact(&hay, |_| b"#".to_vec());
        // Nothing recognisable survives, only the edge characters of a base64 run that mix the
        // value's bits with its neighbours' and the neighbours themselves (a base64 group or
        // two, percent-encoded at worst).
        assert_eq!(forms.find(&out, |_| true), None, "{name}");
        assert!(
            out.len() <= 7 + 2 * 12,
            "{name}: {}",
            String::from_utf8_lossy(&out)
        );
        assert!(out.starts_with(b"x="), "{name}");
        assert!(out.ends_with(b"&y=1"), "{name}");
    }
}

#[test]
fn fragments_of_eight_bytes_are_found_and_shorter_ones_are_not() {
    let forms = SecretForms::new(&[VALUE]);
    for start in 0..=VALUE.len() - FRAGMENT_LEN {
        let f = &VALUE[start..start + FRAGMENT_LEN];
        assert_eq!(forms.find(f, |_| true), Some(0));
        assert_eq!(forms.find(&hex(f), |_| true), Some(0));
        assert_eq!(forms.find(STANDARD.encode(f).as_bytes(), |_| true), Some(0));
    }
    assert_eq!(forms.find(&VALUE[..FRAGMENT_LEN - 1], |_| true), None);
    assert_eq!(forms.find(b"nothing to see here at all", |_| true), None);
}

#[test]
fn short_values_match_raw_and_whole_only() {
    let forms = SecretForms::new(&[b"abc".as_slice(), b"".as_slice()]);
    assert_eq!(
        forms.redact(b"xabcx 616263", |_| b"#".to_vec()),
        b"x#x 616263".to_vec()
    );
    assert!(SecretForms::new(&[b"".as_slice()]).is_empty());
}

#[test]
fn the_wanted_filter_chooses_among_secrets() {
    let forms = SecretForms::new(&[b"first-secret-aaaa".as_slice(), b"second-secret-bbb"]);
    let hay = b"first-secret-aaaa second-secret-bbb";
    assert_eq!(forms.find(hay, |s| s == 1), Some(1));
    assert_eq!(forms.find(b"first-secret-aaaa", |s| s == 1), None);
}

#[test]
fn spans_map_back_through_percent_decoding() {
    let forms = SecretForms::new(&[VALUE]);
    let enc = pct_all(VALUE, true);
    let hay = [b"a=".as_slice(), &enc, b"&b"].concat();
    assert_eq!(
        forms.spans(&hay),
        vec![SecretSpan {
            start: 2,
            end: 2 + enc.len(),
            secret: 0
        }]
    );
}

#[test]
fn debug_shows_no_value() {
    let forms = SecretForms::new(&[VALUE]);
    assert!(!format!("{forms:?}").contains("Real"));
}

#[test]
fn a_large_file_secret_compiles_quickly_and_is_redacted_whole() {
    let pem: Vec<u8> = (0..4096u32)
        .map(|i| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(i * 7919 % 64) as usize]
        })
        .collect();
    let started = std::time::Instant::now();
    let forms = SecretForms::new(&[pem.as_slice()]);
    let built = started.elapsed();
    assert!(built < std::time::Duration::from_secs(5), "{built:?}");
    assert_eq!(forms.max_span(), 16 * 110);
    let hay = [b"xx".as_slice(), &pem[1000..1100], b"yy"].concat();
    assert_eq!(forms.redact(&hay, |_| b"#".to_vec()), b"xx#yy".to_vec());
}

#[test]
fn a_very_large_file_secret_gets_coarse_forms_of_its_head() {
    let big: Vec<u8> = (0..2 * MAX_COARSE_VALUE as u32)
        .map(|i| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                [(i.wrapping_mul(2654435761) >> 26) as usize]
        })
        .collect();
    let started = std::time::Instant::now();
    let forms = SecretForms::new(&[big.as_slice()]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let piece = &big[1000..1000 + 2 * COARSE_WINDOW - 1];
    assert_eq!(forms.find(piece, |_| true), Some(0));
    assert_eq!(forms.find(hex(piece).as_slice(), |_| true), Some(0));
    assert_eq!(forms.find(b"nothing here", |_| true), None);
}

#[test]
fn short_values_are_not_looked_for_in_derived_views() {
    let forms = SecretForms::new(&[b"1234".as_slice()]);
    assert_eq!(
        forms.redact(b"12:34 %31%32%33%34", |_| b"#".to_vec()),
        b"12:34 %31%32%33%34".to_vec()
    );
    assert_eq!(forms.redact(b"x1234x", |_| b"#".to_vec()), b"x#x".to_vec());
}
