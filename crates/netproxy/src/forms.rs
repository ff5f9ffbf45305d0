//! Every form a secret value can take on the wire, and where those forms are in some bytes
//! (SANDBOX.md §6.10, issue 15 items 7 and 8). This module is the one owner of the encodings:
//! the proxy's exfiltration scan and response redaction and the engine's record redaction all
//! go through [`SecretForms`].
//!
//! # What is looked for
//!
//! A value of at least [`FRAGMENT_LEN`] bytes is not searched as a whole but as its
//! *fragments*: every window of [`FRAGMENT_LEN`] bytes of the value, and of the value reversed,
//! in each of these forms:
//!
//! - raw;
//! - hex (matched in any letter case);
//! - standard base64 and base64url, at each of the three alignments a fragment can have inside a
//!   base64 group: for an alignment `k`, the characters of `encode([0; k] ++ fragment)` that only
//!   the fragment's bits decide (ten of them), so padding, the bytes around the fragment and the
//!   padded/unpadded choice do not matter;
//! - each of those encoded strings reversed.
//!
//! Percent-encoding (full or partial, either case, up to twice nested) is undone before searching,
//! so it composes with every form above (a base64 value in a query string, `%2B`/`%2F` and all).
//! A view with short runs of separators dropped (spaces, line breaks, `:`, `,`, quotes, `.`, `-`,
//! `;`, `|`) is searched too, so `od`/`xxd`-style hex, `aa:bb:cc`, a JSON array of characters or
//! a value cut into DNS labels is still found. Character escapes (`\\xHH`, `\\uHHHH`, `&#DDD;`,
//! `&#xHH;`) are decoded in a view of their own.
//! Matching ignores ASCII case throughout, so a value that was upper-cased (a DNS name, a header
//! name) is still found.
//!
//! A value covered by fragments is covered in whole: the fragments of one occurrence overlap, and
//! [`SecretForms::spans`] returns the union of everything they cover. A value shorter than
//! [`FRAGMENT_LEN`] bytes is looked for raw and whole only (too short to tell from noise in any
//! encoding).
//!
//! # What cannot be found
//!
//! A transformation not listed here (encryption, compression, a custom alphabet, a fragment of
//! fewer than [`FRAGMENT_LEN`] bytes, a value spread over several requests) is not recognised;
//! an upstream trusted with a value can always return it in such a form.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// The shortest fragment of a value that is looked for: windows of this many bytes.
pub const FRAGMENT_LEN: usize = 8;

/// Values up to this size get every fragment in every form; longer ones (large file secrets)
/// get the coarser [`coarse_forms_of`], so a multi-megabyte file does not make a
/// hundred-million-pattern automaton.
const MAX_FINE_VALUE: usize = 8 * 1024;

/// The window and stride of the coarse forms.
const COARSE_WINDOW: usize = 32;

/// How much of a large value the coarse forms cover.
const MAX_COARSE_VALUE: usize = 256 * 1024;

/// Bytes that may separate the bytes of a form (`od` and `xxd` output, `a:b:c`, a JSON array
/// of characters, dotted DNS labels): the separator view drops runs of at most
/// [`MAX_SEPARATOR_RUN`] of them.
const SEPARATORS: &[u8] = b" \t\r\n:,\"'.-;|\\";

/// The longest run of separators the separator view drops (longer runs stay, so a match spans
/// a bounded number of input bytes and streaming stays exact).
const MAX_SEPARATOR_RUN: usize = 10;

/// The encoded forms of a set of secret values, compiled into one case-insensitive multi-pattern
/// automaton. Secrets are identified by their index in the list given to [`SecretForms::new`].
/// `Debug` shows only counts, never a value or a pattern.
#[derive(Clone, Default)]
pub struct SecretForms {
    automaton: Option<AhoCorasick>,
    /// The secret each pattern belongs to (the first one, when two secrets share a pattern).
    owners: Vec<usize>,
    /// Whether a pattern is a whole short value, looked for raw only (not in derived views).
    whole_only: Vec<bool>,
    /// The longest pattern, in bytes.
    longest: usize,
    secrets: usize,
}

impl std::fmt::Debug for SecretForms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretForms")
            .field("secrets", &self.secrets)
            .field("patterns", &self.owners.len())
            .finish_non_exhaustive()
    }
}

/// A run of bytes that carries (part of) a secret: `start..end` in the searched bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretSpan {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Which secret (its index in the list given to [`SecretForms::new`]).
    pub secret: usize,
}

impl SecretForms {
    /// The forms of `values` (empty values are ignored).
    pub fn new<V: AsRef<[u8]>>(values: &[V]) -> Self {
        let mut seen: HashMap<Vec<u8>, ()> = HashMap::new();
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<usize> = Vec::new();
        let mut whole_only: Vec<bool> = Vec::new();
        for (secret, value) in values.iter().enumerate() {
            let value = value.as_ref();
            for pattern in forms_of(value) {
                let key = pattern.to_ascii_lowercase();
                if seen.insert(key.clone(), ()).is_none() {
                    patterns.push(key);
                    owners.push(secret);
                    whole_only.push(value.len() < FRAGMENT_LEN);
                }
            }
        }
        let build = |patterns: &[Vec<u8>]| {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(patterns)
        };
        let automaton = if patterns.is_empty() {
            None
        } else {
            match build(&patterns) {
                Ok(ac) => Some(ac),
                Err(error) => {
                    // Never nothing: fall back to the first fragment of each value, raw.
                    tracing::warn!(%error, "secret forms too large; scanning raw prefixes only");
                    patterns.clear();
                    owners.clear();
                    whole_only.clear();
                    for (secret, value) in values.iter().enumerate() {
                        let value = value.as_ref();
                        if !value.is_empty() {
                            patterns.push(value.iter().take(FRAGMENT_LEN).copied().collect());
                            owners.push(secret);
                            whole_only.push(value.len() < FRAGMENT_LEN);
                        }
                    }
                    build(&patterns).ok()
                }
            }
        };
        let longest = patterns.iter().map(Vec::len).max().unwrap_or(0);
        SecretForms {
            automaton,
            owners,
            whole_only,
            longest,
            secrets: values.len(),
        }
    }

    /// Whether there is nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// The most bytes one match can span in the searched input (a pattern under the nested
    /// percent-encodings, or under one with separators between its bytes). A stream searcher
    /// that holds back this many bytes minus one misses nothing.
    pub fn max_span(&self) -> usize {
        // Each pattern byte: at most 3 input bytes under one percent-encoding, 9 under two, 10
        // as an escape, 30 as a percent-encoded escape, 3 × (1 + MAX_SEPARATOR_RUN) with
        // separators after percent-decoding and 10 × (1 + MAX_SEPARATOR_RUN) after unescaping.
        self.longest * (1 + MAX_SEPARATOR_RUN) * 10
    }

    /// The first secret (in input order of the hit) found in `hay` for which `wanted` holds.
    pub fn find(&self, hay: &[u8], wanted: impl Fn(usize) -> bool) -> Option<usize> {
        let ac = self.automaton.as_ref()?;
        let hit = |bytes: &[u8], derived: bool| {
            ac.find_overlapping_iter(bytes)
                .filter(|m| !(derived && self.is_whole_only(m.pattern().as_usize())))
                .map(|m| self.owner(m.pattern().as_usize()))
                .find(|s| wanted(*s))
        };
        hit(hay, false).or_else(|| {
            derived_views(hay, false)
                .iter()
                .find_map(|view| hit(&view.bytes, true))
        })
    }

    /// Every run of `hay` that carries a secret in any form, merged (overlapping or adjacent
    /// runs become one; the secret of a merged run is that of its first byte), in order.
    pub fn spans(&self, hay: &[u8]) -> Vec<SecretSpan> {
        let Some(ac) = &self.automaton else {
            return Vec::new();
        };
        let mut raw: Vec<SecretSpan> = Vec::new();
        let mut collect = |bytes: &[u8], origin: Option<&[(usize, usize)]>| {
            for m in ac.find_overlapping_iter(bytes) {
                if origin.is_some() && self.is_whole_only(m.pattern().as_usize()) {
                    continue;
                }
                let (start, end) = match origin {
                    None => (m.start(), m.end()),
                    Some(o) => (o[m.start()].0, o[m.end() - 1].1),
                };
                raw.push(SecretSpan {
                    start,
                    end,
                    secret: self.owner(m.pattern().as_usize()),
                });
            }
        };
        collect(hay, None);
        for view in derived_views(hay, true) {
            collect(&view.bytes, view.origin.as_deref());
        }
        merge(raw)
    }

    /// `hay` with every span replaced by `replacement(secret)`.
    pub fn redact(&self, hay: &[u8], replacement: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
        replace_spans(hay, &self.spans(hay), replacement)
    }

    fn is_whole_only(&self, pattern: usize) -> bool {
        self.whole_only.get(pattern).copied().unwrap_or(false)
    }

    fn owner(&self, pattern: usize) -> usize {
        self.owners.get(pattern).copied().unwrap_or_default()
    }
}

/// `hay` with each of `spans` (sorted, disjoint) replaced by `replacement(secret)`.
pub fn replace_spans(
    hay: &[u8],
    spans: &[SecretSpan],
    replacement: impl Fn(usize) -> Vec<u8>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut from = 0;
    for s in spans {
        out.extend_from_slice(&hay[from..s.start]);
        out.extend_from_slice(&replacement(s.secret));
        from = s.end;
    }
    out.extend_from_slice(&hay[from..]);
    out
}

fn merge(mut spans: Vec<SecretSpan>) -> Vec<SecretSpan> {
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut out: Vec<SecretSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

/// Every pattern of one value (see the module docs).
fn forms_of(value: &[u8]) -> Vec<Vec<u8>> {
    if value.is_empty() {
        return Vec::new();
    }
    if value.len() < FRAGMENT_LEN {
        return vec![value.to_vec()];
    }
    if value.len() > MAX_FINE_VALUE {
        return coarse_forms_of(value);
    }
    let reversed: Vec<u8> = value.iter().rev().copied().collect();
    let mut out = Vec::new();
    // The value's own separators vanish in the separator view: its fragments without them.
    let bare: Vec<u8> = value
        .iter()
        .copied()
        .filter(|b| !SEPARATORS.contains(b))
        .collect();
    if bare.len() != value.len() {
        let bare_reversed: Vec<u8> = bare.iter().rev().copied().collect();
        for base in [&bare, &bare_reversed] {
            out.extend(base.windows(FRAGMENT_LEN).map(<[u8]>::to_vec));
        }
    }
    for base in [value, reversed.as_slice()] {
        for fragment in base.windows(FRAGMENT_LEN) {
            out.push(fragment.to_vec());
            for e in encoded_forms(fragment) {
                out.push(e.iter().rev().copied().collect());
                out.push(e);
            }
        }
    }
    out
}

/// Hex and the base64/base64url inner strings at each alignment of `fragment`.
fn encoded_forms(fragment: &[u8]) -> Vec<Vec<u8>> {
    let mut encoded = vec![hex(fragment)];
    for k in 0..3 {
        encoded.push(base64_inner(fragment, k, false));
        encoded.push(base64_inner(fragment, k, true));
    }
    encoded
}

/// A value over [`MAX_FINE_VALUE`] bytes (a large file secret): windows of
/// [`COARSE_WINDOW`] bytes at every [`COARSE_WINDOW`]-th offset of its first
/// [`MAX_COARSE_VALUE`] bytes, raw, hex and base64, so the automaton stays small. Any piece of
/// `2 × COARSE_WINDOW − 1` bytes or more of that prefix is found.
fn coarse_forms_of(value: &[u8]) -> Vec<Vec<u8>> {
    let head = &value[..value.len().min(MAX_COARSE_VALUE)];
    let mut out = Vec::new();
    for start in (0..=head.len() - COARSE_WINDOW).step_by(COARSE_WINDOW) {
        let window = &head[start..start + COARSE_WINDOW];
        out.push(window.to_vec());
        out.extend(encoded_forms(window));
    }
    out
}

fn hex(bytes: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .collect()
}

/// The base64 characters that only `fragment`'s bits decide when it starts `k` bytes into a
/// 3-byte group: characters whose 6 bits lie wholly inside the fragment.
fn base64_inner(fragment: &[u8], k: usize, url: bool) -> Vec<u8> {
    let mut input = vec![0u8; k];
    input.extend_from_slice(fragment);
    let engine = if url {
        URL_SAFE_NO_PAD
    } else {
        STANDARD_NO_PAD
    };
    let encoded = engine.encode(&input).into_bytes();
    let first = (8 * k).div_ceil(6);
    let end = (8 * (k + fragment.len())) / 6;
    encoded
        .get(first..end)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// For each byte of a derived view, its `start..end` in the searched bytes.
type Origins = Vec<(usize, usize)>;

/// A view of the searched bytes with an encoding undone; `origin` is kept when asked for.
struct View {
    bytes: Vec<u8>,
    origin: Option<Origins>,
}

impl View {
    /// `self` is a view of `outer`'s bytes: map it back to what `outer` is a view of.
    fn through(self, outer: &View) -> View {
        let origin = match (self.origin, &outer.origin) {
            (Some(inner), Some(o)) => {
                Some(inner.iter().map(|(s, e)| (o[*s].0, o[*e - 1].1)).collect())
            }
            _ => None,
        };
        View {
            bytes: self.bytes,
            origin,
        }
    }
}

/// The views searched besides the bytes themselves: unescaped (then without separators too),
/// without separators, percent-decoded once and twice, and percent-decoded then without
/// separators or unescaped. Only the views that differ from their source are made.
fn derived_views(hay: &[u8], track: bool) -> Vec<View> {
    let mut views = Vec::new();
    if let Some(unescaped) = unescape(hay, track) {
        if let Some(stripped) = drop_separators(&unescaped.bytes, track) {
            views.push(stripped.through(&unescaped));
        }
        views.push(unescaped);
    }
    if let Some(stripped) = drop_separators(hay, track) {
        views.push(stripped);
    }
    if let Some(once) = percent_decode(hay, track) {
        if let Some(twice) = percent_decode(&once.bytes, track) {
            views.push(twice.through(&once));
        }
        if let Some(stripped) = drop_separators(&once.bytes, track) {
            views.push(stripped.through(&once));
        }
        if let Some(unescaped) = unescape(&once.bytes, track) {
            views.push(unescaped.through(&once));
        }
        views.push(once);
    }
    views
}

/// `bytes` with every `%XX` (either case) decoded; `None` when there is nothing to decode.
fn percent_decode(bytes: &[u8], track: bool) -> Option<View> {
    let hex_value = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    if !bytes.contains(&b'%') {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut map = Vec::with_capacity(if track { bytes.len() } else { 0 });
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex_value),
                bytes.get(i + 2).copied().and_then(hex_value),
            )
        {
            out.push(h << 4 | l);
            if track {
                map.push((i, i + 3));
            }
            i += 3;
            changed = true;
        } else {
            out.push(bytes[i]);
            if track {
                map.push((i, i + 1));
            }
            i += 1;
        }
    }
    changed.then_some(View {
        bytes: out,
        origin: track.then_some(map),
    })
}

/// `bytes` with character escapes decoded: `\\xHH`, `\\uHHHH` (ASCII only), `&#DDD;` and
/// `&#xHH;` (ASCII only), as JSON, JavaScript, C and HTML write them; `None` when there are none.
fn unescape(bytes: &[u8], track: bool) -> Option<View> {
    if !bytes.contains(&b'\\') && !bytes.contains(&b'&') {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut map = Vec::new();
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        match escaped_at(&bytes[i..]) {
            Some((byte, len)) => {
                out.push(byte);
                if track {
                    map.push((i, i + len));
                }
                i += len;
                changed = true;
            }
            None => {
                out.push(bytes[i]);
                if track {
                    map.push((i, i + 1));
                }
                i += 1;
            }
        }
    }
    changed.then_some(View {
        bytes: out,
        origin: track.then_some(map),
    })
}

/// The ASCII byte an escape at the start of `rest` stands for, and the escape's length.
fn escaped_at(rest: &[u8]) -> Option<(u8, usize)> {
    let number = |digits: &[u8], radix: u32| {
        let text = std::str::from_utf8(digits).ok()?;
        u32::from_str_radix(text, radix)
            .ok()
            .and_then(|n| u8::try_from(n).ok())
            .filter(u8::is_ascii)
    };
    let hex_run = |from: usize, len: usize| {
        rest.get(from..from + len)
            .filter(|d| d.iter().all(u8::is_ascii_hexdigit))
            .and_then(|d| number(d, 16))
    };
    match rest {
        [b'\\', b'x' | b'X', ..] => hex_run(2, 2).map(|b| (b, 4)),
        [b'\\', b'u' | b'U', ..] => hex_run(2, 4).map(|b| (b, 6)),
        [b'&', b'#', b'x' | b'X', ..] => {
            let end = rest.iter().take(10).position(|b| *b == b';')?;
            let digits = rest.get(3..end)?;
            (!digits.is_empty() && digits.iter().all(u8::is_ascii_hexdigit))
                .then(|| number(digits, 16))
                .flatten()
                .map(|b| (b, end + 1))
        }
        [b'&', b'#', ..] => {
            let end = rest.iter().take(10).position(|b| *b == b';')?;
            let digits = rest.get(2..end)?;
            (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit))
                .then(|| number(digits, 10))
                .flatten()
                .map(|b| (b, end + 1))
        }
        _ => None,
    }
}

/// `bytes` without the runs of at most [`MAX_SEPARATOR_RUN`] [`SEPARATORS`]; `None` when
/// there are none.
fn drop_separators(bytes: &[u8], track: bool) -> Option<View> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut map = Vec::new();
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..]
            .iter()
            .take_while(|b| SEPARATORS.contains(b))
            .count();
        if run > 0 && run <= MAX_SEPARATOR_RUN && !out.is_empty() {
            changed = true;
            i += run;
            continue;
        }
        let keep = run.max(1);
        out.extend_from_slice(&bytes[i..i + keep]);
        if track {
            map.extend((i..i + keep).map(|j| (j, j + 1)));
        }
        i += keep;
    }
    changed.then_some(View {
        bytes: out,
        origin: track.then_some(map),
    })
}

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
