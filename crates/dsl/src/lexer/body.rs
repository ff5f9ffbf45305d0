//! Block scalars (DSL.md §1.5) and prompt bodies (§1.6): runs of indented lines that do not
//! take part in indentation, read whole by the lexer.

use super::{Lexer, Tok, width_of};
use crate::ast::{LineStart, Span, StrKind, StrLit};
use crate::diag::Code;

/// What a run of indented lines is read as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// `key: |` (§1.5).
    Block,
    /// `prompt NAME:` (§1.6).
    Prompt,
}

/// A line of a block or body: blank, or content between two byte offsets.
enum BodyLine {
    Blank(u32),
    Content { start: usize, end: usize, line: u32 },
}

impl Lexer<'_> {
    /// After `key: |`: the block scalar, then the key line's NEWLINE (§1.5).
    pub(super) fn block_scalar(&mut self, pipe: Span) {
        let newline = Span::new(pipe.line, pipe.col.saturating_add(1), 1);
        self.skip_to_eol();
        let after_header = self.line_info(self.line_start).next;
        self.jump_to_line(after_header, self.line.saturating_add(1));
        let k = self.line_indent;
        match self.read_body(k, Body::Block, newline) {
            Some(lit) => {
                let span = lit.span;
                self.emit(Tok::Block(lit), span);
                self.last_end = (newline.line, newline.col);
                self.emit_virtual(Tok::Newline, newline);
                self.end_line();
            }
            None => self.end_line(),
        }
    }

    /// After a `prompt NAME:` header: the body, then the header's NEWLINE (§1.6).
    pub(super) fn prompt_body(&mut self) {
        let newline = self.end_span();
        self.skip_to_eol();
        let after_header = self.line_info(self.line_start).next;
        if after_header == self.pos {
            // The header is the last line and has no LF.
            self.pos = self.src.len();
        } else {
            self.jump_to_line(after_header, self.line.saturating_add(1));
        }
        if let Some(lit) = self.read_body(0, Body::Prompt, newline) {
            let span = lit.span;
            self.emit(Tok::PromptBody(lit), span);
            self.last_end = (newline.line, newline.col);
            self.emit_virtual(Tok::Newline, newline);
            self.end_line();
        } else {
            self.end_line();
        }
    }

    /// Reads a block scalar or prompt body whose first line starts at the cursor, with key
    /// indentation `k` (rules 2–5 of §1.5 and §1.6). Leaves the cursor at the start of the
    /// line that ended it. On error, emits it and returns `None`.
    fn read_body(&mut self, k: u32, kind: Body, header: Span) -> Option<StrLit> {
        let len = self.src.len();
        let mut at = self.pos;
        let mut line = self.line;
        // Rule 2: the first non-blank line.
        let first = loop {
            if at >= len {
                break None;
            }
            let info = self.line_info(at);
            if !info.blank {
                break Some(info);
            }
            if info.next <= at {
                break None;
            }
            at = info.next;
            line = line.saturating_add(1);
        };
        let empty = |line: u32, col: u32| StrLit {
            value: String::new(),
            kind: StrKind::PromptBody,
            span: Span::new(line, col, 1),
            lines: vec![LineStart {
                value_offset: 0,
                line,
                col,
            }],
        };
        let Some(first) = first else {
            self.jump_to_line(len, line);
            return match kind {
                Body::Prompt => Some(empty(header.line, header.col)),
                Body::Block => {
                    self.error(
                        Code::E002,
                        header,
                        "expected an indented block after \"|\", found end of file",
                    );
                    None
                }
            };
        };
        if first.spaces <= k {
            self.jump_to_line(first.start, line);
            let line_span = Span::new(line, 1, first.spaces.saturating_add(1));
            if first.after_spaces == Some('\t') {
                self.error(Code::E003, line_span, "tab in indentation");
                return None;
            }
            return match kind {
                Body::Prompt => Some(empty(header.line, header.col)),
                Body::Block => {
                    self.error(
                        Code::E002,
                        Span::new(line, first.spaces.saturating_add(1), 1),
                        format!(
                            "expected an indented block after \"|\", found a line indented {} \
                             (at most {k})",
                            first.spaces
                        ),
                    );
                    None
                }
            };
        }
        let c = first.spaces;
        let cb = c as usize;
        // Rule 3: every following line that is blank or indented at least c.
        let mut parts = Vec::new();
        let mut cur = first;
        loop {
            if cur.blank {
                parts.push(BodyLine::Blank(line));
            } else {
                parts.push(BodyLine::Content {
                    start: cur.start + cb,
                    end: cur.end,
                    line,
                });
            }
            at = cur.next;
            line = line.saturating_add(1);
            if at >= len || cur.next == cur.end {
                at = at.min(len);
                break;
            }
            let info = self.line_info(at);
            if info.blank || info.spaces >= c {
                cur = info;
                continue;
            }
            let line_span = Span::new(line, 1, info.spaces.saturating_add(1));
            if info.after_spaces == Some('\t') {
                self.jump_to_line(at, line);
                self.error(Code::E003, line_span, "tab in indentation");
                return None;
            }
            if info.spaces > k {
                self.jump_to_line(at, line);
                let what = match kind {
                    Body::Block => "block",
                    Body::Prompt => "prompt body",
                };
                self.error(
                    Code::E003,
                    line_span,
                    format!(
                        "misaligned end of {what}: indentation {} is less than the {what}'s {c} \
                         but more than {k}",
                        info.spaces
                    ),
                );
                return None;
            }
            break;
        }
        self.jump_to_line(at, line);
        // Rule 4: trailing blank lines are dropped.
        while matches!(parts.last(), Some(BodyLine::Blank(_))) {
            parts.pop();
        }
        let mut value = String::new();
        let mut lines = Vec::with_capacity(parts.len());
        let mut offset = 0usize;
        let mut span = Span::new(line, c.saturating_add(1), 1);
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                value.push('\n');
                offset += 1;
            }
            match *part {
                BodyLine::Blank(l) => lines.push(LineStart {
                    value_offset: offset,
                    line: l,
                    col: 1,
                }),
                BodyLine::Content { start, end, line } => {
                    let text = self.src.get(start..end).unwrap_or("");
                    if i == 0 {
                        span = Span::new(line, c.saturating_add(1), width_of(text));
                    }
                    lines.push(LineStart {
                        value_offset: offset,
                        line,
                        col: c.saturating_add(1),
                    });
                    value.push_str(text);
                    offset += text.chars().count();
                }
            }
        }
        let kind = match kind {
            Body::Block => {
                value.push('\n');
                StrKind::Block
            }
            Body::Prompt => StrKind::PromptBody,
        };
        Some(StrLit {
            value,
            kind,
            span,
            lines,
        })
    }
}
