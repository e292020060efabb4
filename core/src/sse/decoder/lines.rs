//! Splitting the input into lines (WHATWG §9.2.5): the in-chunk hot loop, lines carried
//! across chunks, the byte order mark, and skipping after a limit error.

use std::borrow::Cow;

use super::fields::{Data, Src, Step, holds_nothing_of_the_event, value_start};
use super::{DecodeError, Decoder, Mode};
use crate::sse::line_end;

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// A carried `data` line shorter than this is copied into the data buffer (no reference
/// counts); a longer one is shared from the carried-line buffer (no copy).
const COPY_UP_TO: usize = 4096;

/// How many first bytes of a too-long line decide whether it holds anything of its
/// event: `retry:` is the longest name with its colon.
const NAME_PREFIX: usize = 6;

impl Decoder {
    /// The hot loop: processes the complete lines of the front chunk from `pos`, each
    /// borrowed from the chunk (zero copy), until one yields a step or the chunk ends;
    /// a final partial line is carried into `line`.
    pub(super) fn scan_lines(&mut self) -> Result<Option<Step>, DecodeError> {
        let bytes: &[u8] = self.front.bytes();
        let max_line_len = self.limits.max_line_len();
        let mut pos = self.pos;
        while let Some(&first) = bytes.get(pos) {
            // A blank line right after a line end is the most common line of all.
            let len = if first == b'\n' || first == b'\r' {
                0
            } else if let Some(len) = self.line_ends.find(&bytes[pos..]) {
                len
            } else {
                // The line continues in a later chunk: carry its start.
                return self.carry_rest(pos, self.line_hint);
            };
            let (start, end) = (pos, pos + len);
            if len != 0
                && len <= max_line_len
                && end > self.front.valid_end()
                && !self.front.is_checked()
            {
                // SSE-PARSE-1: validate the rest of the chunk once, with SIMD; each line
                // inside the valid span then needs no check of its own, and a partial
                // line at the chunk's end is carried with its valid prefix known. The
                // line is read again, as the first of the checked span.
                self.pos = start;
                self.front.check_from(start);
                return Ok(None);
            }
            let (next, cr_at_end) = line_end::step_over(bytes, end);
            pos = next;
            self.skip_lf = cr_at_end;
            if len == 0 {
                // SSE-PARSE-6: a blank line dispatches.
                if let Some(step) = self.fields.dispatch() {
                    self.pos = pos;
                    return Ok(Some(step));
                }
                continue;
            }
            if len > max_line_len {
                self.pos = pos;
                let mut prefix = [0; NAME_PREFIX];
                let prefix = name_prefix(&mut prefix, &bytes[start..end], &[]);
                return self.too_long(prefix, false);
            }
            if end <= self.front.valid_end()
                && matches!(self.fields.data, Data::None)
                && bytes[start..end].starts_with(b"data:")
            {
                // The hot path of `Fields::line`: an event's first `data` line is kept as a
                // range of the chunk (SSE-PARSE-8, SSE-PARSE-11).
                let value = value_start(bytes, start + 5, end);
                if end - value <= self.fields.max_event_len {
                    self.fields.data = Data::InChunk { start: value, end };
                    continue;
                }
            }
            match self.fields.line(Src::Chunk(&self.front), start, end) {
                Ok(None) => {}
                Ok(Some(step)) => {
                    self.pos = pos;
                    return Ok(Some(step));
                }
                Err(e) => {
                    self.pos = pos;
                    return self.fail(e, false);
                }
            }
        }
        self.pos = pos;
        Ok(None)
    }

    /// Completes the line carried in `line` with the front chunk (or carries more of it).
    pub(super) fn finish_carried_line(&mut self) -> Result<Option<Step>, DecodeError> {
        let bytes = self.front.bytes();
        let max_line_len = self.limits.max_line_len();
        let Some(len) = self.line_ends.find(&bytes[self.pos..]) else {
            return self.carry_rest(self.pos, 0);
        };
        let piece = &bytes[self.pos..self.pos + len];
        let (next, cr_at_end) = line_end::step_over(bytes, self.pos + len);
        self.pos = next;
        self.skip_lf = cr_at_end;
        self.mode = Mode::Lines;
        if self.line.len() + len > max_line_len {
            let mut prefix = [0; NAME_PREFIX];
            let prefix = name_prefix(&mut prefix, self.line.as_bytes(), piece);
            self.line.clear();
            return self.too_long(prefix, false);
        }
        let valid = self.line.complete(piece, max_line_len);
        self.line_hint = self.line.len();
        let line = self.line.as_bytes();
        if line.len() < COPY_UP_TO && line.starts_with(b"data:") {
            // The common case: a short data line split by a chunk boundary. Its value is
            // copied into the data buffer, so the line buffer is reused as it is. A long
            // line (a large tool result) is shared below instead of copied.
            let value = value_start(line, 5, line.len());
            let text = match self.line.text() {
                // `value` follows ASCII bytes, so it is a character boundary.
                Some(text) if valid => Cow::Borrowed(text.get(value..).unwrap_or_default()),
                _ => String::from_utf8_lossy(&line[value..]),
            };
            let result = self.fields.carried_data(&text);
            self.line.clear();
            return match result {
                Ok(()) => Ok(None),
                Err(e) => self.fail(e, false),
            };
        }
        let result = match self.line.take() {
            Ok(text) => self.fields.line(Src::Text(&text), 0, text.len()),
            Err(raw) => self.fields.line(Src::Raw(&raw), 0, raw.len()),
        };
        match result {
            Err(e) => self.fail(e, false),
            result => result,
        }
    }

    /// The front chunk from `from` on continues the current line in a later chunk: carries
    /// it into `line` (`hint` sizes a new carry), or fails if the line passes the limit.
    fn carry_rest(&mut self, from: usize, hint: usize) -> Result<Option<Step>, DecodeError> {
        let bytes = self.front.bytes();
        let rest = &bytes[from..];
        self.pos = bytes.len();
        let max_line_len = self.limits.max_line_len();
        if self.line.len() + rest.len() > max_line_len {
            let mut prefix = [0; NAME_PREFIX];
            let prefix = name_prefix(&mut prefix, self.line.as_bytes(), rest);
            self.line.clear();
            // The line goes on in the next chunk.
            return self.too_long(prefix, true);
        }
        if self.line.is_empty() {
            // A new carry starts at the front of a buffer big enough for a line like the
            // last one, not in the tail the last (shared) line left: growing from there
            // would copy the line again.
            self.line
                .prepare(hint.max(rest.len()).min(max_line_len), max_line_len);
            self.line.start(&self.front, from, hint, max_line_len);
            self.mode = Mode::Carrying;
        } else {
            self.line.push(rest, hint, max_line_len);
        }
        Ok(None)
    }

    /// A line longer than `max_line_len`, judged by its first bytes `prefix`: a comment or
    /// an ignored field costs only itself; any other line discards its event. `in_line`:
    /// the line goes on after the input seen so far.
    fn too_long(&mut self, prefix: &[u8], in_line: bool) -> Result<Option<Step>, DecodeError> {
        let limit = self.limits.max_line_len();
        // However the line was split into chunks, at least `limit + 1` of its bytes have
        // been seen: judging by no more than that keeps the answer the same for every
        // split.
        let prefix = &prefix[..prefix.len().min(limit.saturating_add(1))];
        if holds_nothing_of_the_event(prefix) {
            self.mode = if in_line {
                Mode::SkippingLine
            } else {
                Mode::Lines
            };
            return Err(DecodeError::LineSkipped { limit });
        }
        self.fail(DecodeError::LineTooLong { limit }, in_line)
    }

    /// Enters discard mode (the rest of the current event is skipped) and reports `e`.
    /// `in_line`: the input seen so far ends inside a line of the event.
    fn fail<T>(&mut self, e: DecodeError, in_line: bool) -> Result<Option<T>, DecodeError> {
        self.mode = Mode::DiscardingEvent { in_line };
        self.line.clear();
        self.fields.clear_event();
        Err(e)
    }

    /// Discard mode: skips one line (or the rest of the chunk); a blank line ends the
    /// discarded event and runs the dispatch step on its (cleared) buffers.
    pub(super) fn skip_discarded(&mut self, in_line: bool) {
        self.mode = match self.skip_past_line_end() {
            Some(0) if !in_line => {
                let dispatched = self.fields.dispatch();
                debug_assert!(dispatched.is_none(), "data was cleared on failure");
                Mode::Lines
            }
            Some(_) => Mode::DiscardingEvent { in_line: false },
            None => Mode::DiscardingEvent { in_line: true },
        };
    }

    /// After a too-long comment or ignored field that continues: skips to its line end.
    pub(super) fn skip_line(&mut self) {
        if self.skip_past_line_end().is_some() {
            self.mode = Mode::Lines;
        }
    }

    /// Steps past the end of the line `pos` is in: `Some` with the number of line bytes
    /// skipped if the line ends in the front chunk, `None` if it goes on after it (the
    /// chunk is then consumed).
    fn skip_past_line_end(&mut self) -> Option<usize> {
        let bytes = self.front.bytes();
        let Some(len) = self.line_ends.find(&bytes[self.pos..]) else {
            self.pos = bytes.len();
            return None;
        };
        let (next, cr_at_end) = line_end::step_over(bytes, self.pos + len);
        self.pos = next;
        self.skip_lf = cr_at_end;
        Some(len)
    }

    /// SSE-PARSE-2: strips one BOM at stream start, also when it is split across chunks.
    /// If the bytes matched so far turn out not to be a BOM, they are the start of the
    /// first line.
    pub(super) fn strip_bom(&mut self, matched: u8) {
        let have = usize::from(matched);
        let buf = &self.front.bytes()[self.pos..];
        let n = (BOM.len() - have).min(buf.len());
        if buf[..n] != BOM[have..have + n] {
            if have == 0 {
                self.mode = Mode::Lines;
            } else {
                let limit = self.limits.max_line_len();
                self.line.push(&BOM[..have], 0, limit.max(have));
                self.mode = Mode::Carrying;
            }
        } else if have + n == BOM.len() {
            self.pos += n;
            self.mode = Mode::Lines;
        } else {
            self.pos += n;
            self.mode = Mode::Bom {
                matched: (have + n) as u8,
            };
        }
    }

    /// SSE-PARSE-19: at end of stream the unterminated line and event are dropped.
    pub(super) fn end_of_stream(&mut self) {
        self.mode = Mode::Ended;
        self.line.clear();
        self.skip_lf = false;
        self.fields.clear_event();
        // The id buffer is not copied to the last event ID string: no dispatch ran.
        self.fields.id_buf = None;
    }
}

/// The first [`NAME_PREFIX`] bytes of the line `carried` + `rest`, in `buf`.
fn name_prefix<'a>(buf: &'a mut [u8; NAME_PREFIX], carried: &[u8], rest: &[u8]) -> &'a [u8] {
    let from_carried = carried.len().min(NAME_PREFIX);
    buf[..from_carried].copy_from_slice(&carried[..from_carried]);
    let from_rest = rest.len().min(NAME_PREFIX - from_carried);
    buf[from_carried..from_carried + from_rest].copy_from_slice(&rest[..from_rest]);
    &buf[..from_carried + from_rest]
}
