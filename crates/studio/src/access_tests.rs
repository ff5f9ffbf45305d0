use axum::http::{HeaderMap, HeaderValue, header};

use super::*;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(*k, HeaderValue::from_static(v));
    }
    map
}

fn loopback() -> Access {
    Access::new("t0k3n".into(), "127.0.0.1:7878".parse().unwrap())
}

fn wide() -> Access {
    Access::new("t0k3n".into(), "0.0.0.0:7878".parse().unwrap())
}

#[test]
fn loopback_reads_are_open_only_for_a_loopback_host() {
    let a = loopback();
    for host in [
        "127.0.0.1:7878",
        "localhost:7878",
        "[::1]:7878",
        "LOCALHOST",
    ] {
        assert_eq!(
            a.check_read(&headers(&[("host", host)]), None),
            Ok(Granted::Plain),
            "{host}"
        );
    }
    // DNS rebinding: a hostile name resolving to 127.0.0.1.
    for host in ["evil.example:7878", "127.0.0.1.evil.example", ""] {
        assert_eq!(
            a.check_read(&headers(&[("host", host)]), None)
                .map_err(|d| d.status),
            Err(421),
            "{host}"
        );
    }
    assert!(a.check_read(&HeaderMap::new(), None).is_err());
}

#[test]
fn off_loopback_every_read_needs_the_token() {
    let a = wide();
    let h = headers(&[("host", "10.0.0.5:7878")]);
    assert_eq!(a.check_read(&h, None).map_err(|d| d.status), Err(401));
    assert_eq!(
        a.check_read(&h, Some("wrong")).map_err(|d| d.status),
        Err(401)
    );
    assert_eq!(a.check_read(&h, Some("")).map_err(|d| d.status), Err(401));
    assert_eq!(a.check_read(&h, Some("t0k3n")), Ok(Granted::SetCookie));
    let mut b = h.clone();
    b.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer t0k3n"),
    );
    assert_eq!(a.check_read(&b, None), Ok(Granted::Plain));
    let mut c = h.clone();
    c.insert(
        header::COOKIE,
        HeaderValue::from_static("a=b; iterion_studio_token=t0k3n"),
    );
    assert_eq!(a.check_read(&c, None), Ok(Granted::Plain));
    let mut d = h;
    d.insert(
        header::COOKIE,
        HeaderValue::from_static("iterion_studio_token=t0k3"),
    );
    assert!(a.check_read(&d, None).is_err());
}

#[test]
fn a_write_needs_the_token_and_the_same_origin() {
    let a = loopback();
    let same = headers(&[
        ("host", "127.0.0.1:7878"),
        ("origin", "http://127.0.0.1:7878"),
    ]);
    assert_eq!(a.check_write(&same, Some("t0k3n")), Ok(()));
    assert_eq!(a.check_write(&same, None).map_err(|d| d.status), Err(401));
    assert_eq!(
        a.check_write(&same, Some("nope")).map_err(|d| d.status),
        Err(401)
    );
    let cross = headers(&[
        ("host", "127.0.0.1:7878"),
        ("origin", "http://evil.example"),
    ]);
    assert_eq!(
        a.check_write(&cross, Some("t0k3n")).map_err(|d| d.status),
        Err(403)
    );
    let no_origin = headers(&[("host", "127.0.0.1:7878")]);
    assert_eq!(
        a.check_write(&no_origin, Some("t0k3n"))
            .map_err(|d| d.status),
        Err(403)
    );
    let site = headers(&[
        ("host", "127.0.0.1:7878"),
        ("origin", "http://127.0.0.1:7878"),
        ("sec-fetch-site", "cross-site"),
    ]);
    assert_eq!(
        a.check_write(&site, Some("t0k3n")).map_err(|d| d.status),
        Err(403)
    );
    // A browser's own word (Origin may be `null` under a strict referrer policy).
    let fetch_site = headers(&[
        ("host", "127.0.0.1:7878"),
        ("origin", "null"),
        ("sec-fetch-site", "same-origin"),
    ]);
    assert_eq!(a.check_write(&fetch_site, Some("t0k3n")), Ok(()));
    let bearer = headers(&[
        ("host", "127.0.0.1:7878"),
        ("authorization", "Bearer t0k3n"),
    ]);
    assert_eq!(a.check_write(&bearer, None), Ok(()));
}

#[test]
fn generated_tokens_are_long_and_differ() {
    let a = generate_token().unwrap();
    let b = generate_token().unwrap();
    assert_eq!(a.len(), 64);
    assert_ne!(a, b);
}
