//! Whole front end on arbitrary bytes: never panics, never hangs, and its outputs hold together.
#![no_main]

use iterion_dsl::{CompileOptions, compile, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for ask_user_in_sandbox in [false, true] {
        let out = compile(data, &CompileOptions { ask_user_in_sandbox });
        // A workflow is produced only for error-free input.
        assert!(out.workflow.is_none() || out.error_count() == 0);
        // Diagnostics are sorted and anchored inside the file.
        // Lines of the normalised text (CR and CRLF are line breaks too), plus one for EOF.
        let src = render::display_source(data);
        let lines = src.split('\n').count() as u32 + 1;
        for w in out.diagnostics.windows(2) {
            assert!((w[0].span.line, w[0].span.col) <= (w[1].span.line, w[1].span.col));
        }
        for d in &out.diagnostics {
            assert!(d.span.line >= 1 && d.span.line <= lines, "{d:?}");
        }
        // Rendering any outcome is total.
        let _ = render::human("fuzz.iter", &src, &out.diagnostics);
        let _ = render::json("fuzz.iter", &out.diagnostics);
    }
});
