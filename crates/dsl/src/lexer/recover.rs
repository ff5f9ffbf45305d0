//! Error recovery (DSL.md §2.2): skipping to the next line at indentation 0.

use super::{Lexer, LineInfo, ident_continue, is_ident};

/// Whether a whole physical line is a `prompt NAME:` header (§1.6).
fn is_prompt_header(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("prompt") else {
        return false;
    };
    if !rest.starts_with([' ', '\t']) {
        return false;
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let name_len = rest
        .find(|c: char| !ident_continue(c))
        .unwrap_or(rest.len());
    let Some((name, rest)) = rest.split_at_checked(name_len) else {
        return false;
    };
    if !is_ident(name) {
        return false;
    }
    let Some(rest) = rest.trim_start_matches([' ', '\t']).strip_prefix(':') else {
        return false;
    };
    let rest = rest.trim_start_matches([' ', '\t']);
    rest.is_empty() || rest.starts_with('#')
}

impl Lexer<'_> {
    /// Skips to the next line at indentation 0 (DSL.md §2.2) and resets the layout state.
    ///
    /// Skipping is lexical but layout-blind: brackets are ignored (an unclosed one must not
    /// swallow the rest of the file), raw strings are skipped whole (their lines may start at
    /// column 1), and the lines of a block scalar or prompt body opened on a skipped line are
    /// skipped by their indentation (they may hold unbalanced backticks).
    pub(crate) fn recover(&mut self) {
        self.pending.clear();
        self.brackets.clear();
        self.unclosed = None;
        self.indents.truncate(1);
        self.end_line();
        let len = self.src.len();
        loop {
            if self.pos >= len {
                self.at_line_start = false;
                return;
            }
            if self.pos == self.line_start {
                let info = self.line_info(self.pos);
                if info.spaces == 0 && !matches!(info.after_spaces, None | Some('\t' | '#')) {
                    self.at_line_start = true;
                    return;
                }
            }
            let last = self.skip_physical_line();
            let ended = self.line_start;
            let prev_line = self.last_skipped_line_start(ended);
            let header = self.src.get(prev_line..ended).unwrap_or("");
            let header = header.strip_suffix('\n').unwrap_or(header);
            if is_prompt_header(header) {
                self.skip_lines_while(|info| {
                    info.blank || info.spaces > 0 || info.after_spaces == Some('\t')
                });
            } else if last == Some('|') {
                let k = self.line_info(prev_line).spaces;
                self.skip_lines_while(|info| {
                    info.blank
                        || info.spaces > k
                        || (info.spaces == k && info.after_spaces == Some('\t'))
                });
            }
        }
    }

    /// Whether a bracket is open (or was left open at the end of the text).
    pub(crate) fn in_bracket(&self) -> bool {
        !self.brackets.is_empty() || self.unclosed.is_some()
    }

    /// Recovers from an error inside brackets: skipping restarts just after the outermost open
    /// bracket, so a bracket that is never closed does not swallow the declarations after it
    /// (the next line at indentation 0 after the bracket's line is where parsing resumes).
    pub(crate) fn recover_after_bracket(&mut self) {
        let at = self
            .brackets
            .first()
            .map(|(_, span, offset)| (*offset, span.line, span.col.saturating_add(1)))
            .or(self.unclosed);
        if let Some((offset, line, col)) = at {
            let before = self.src.get(..offset).unwrap_or("");
            self.pos = offset.min(self.src.len());
            self.line = line;
            self.col = col;
            self.line_start = before.rfind('\n').map_or(0, |i| i + 1);
        }
        self.recover();
    }

    /// Skips the rest of the cursor's physical line (a raw string may carry it onto later
    /// lines), consuming its `\n`. Returns the last significant char outside strings and
    /// comments.
    fn skip_physical_line(&mut self) -> Option<char> {
        let mut last = None;
        loop {
            match self.peek() {
                None => return last,
                Some('\n') => {
                    self.bump();
                    return last;
                }
                Some('"') => {
                    self.bump();
                    loop {
                        match self.peek() {
                            None | Some('\n') => break,
                            Some('\\') => {
                                self.bump();
                                if !matches!(self.peek(), None | Some('\n')) {
                                    self.bump();
                                }
                            }
                            Some('"') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {
                                self.bump();
                            }
                        }
                    }
                    last = Some('"');
                }
                Some('`') => {
                    self.bump();
                    let target = match self.rest().find('`') {
                        Some(i) => self.pos + i + 1,
                        None => self.src.len(),
                    };
                    while self.pos < target && self.bump().is_some() {}
                    last = Some('`');
                }
                Some('#') => self.skip_to_eol(),
                Some(c) => {
                    self.bump();
                    if c != ' ' && c != '\t' {
                        last = Some(c);
                    }
                }
            }
        }
    }

    /// The start of the physical line that ends just before `line_start`.
    fn last_skipped_line_start(&self, line_start: usize) -> usize {
        let before = self.src.get(..line_start.saturating_sub(1)).unwrap_or("");
        before.rfind('\n').map_or(0, |i| i + 1)
    }

    /// Skips whole lines while `keep` holds (the cursor is at a line start).
    fn skip_lines_while(&mut self, keep: impl Fn(&LineInfo) -> bool) {
        let len = self.src.len();
        while self.pos < len && self.pos == self.line_start {
            let info = self.line_info(self.pos);
            if !keep(&info) {
                return;
            }
            if info.next <= self.pos {
                self.pos = len;
                return;
            }
            self.jump_to_line(info.next, self.line.saturating_add(1));
        }
    }
}
