//! The decode corpora: whole `text/event-stream` bodies with their expected results.

use bytes::Bytes;

use crate::payload::{Payloads, progress, tool_result};
use crate::rng::XorShift;

/// Chunk size of a busy HTTP/1.1 or HTTP/2 read: 16 KiB.
pub const CHUNK_16K: usize = 16 * 1024;
/// Chunk size of one TCP segment on a 1500-byte-MTU path (the maximum segment size).
pub const CHUNK_MSS: usize = 1460;
/// Every chunk size the decode benches run with.
pub const CHUNK_SIZES: [usize; 2] = [CHUNK_16K, CHUNK_MSS];

/// The label of a byte size in bench group names: a chunk size (`16KiB`, `1460B`) or the
/// length an out-of-cache corpus is repeated to (`64MiB`).
pub fn chunk_label(size: usize) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{}MiB", size >> 20)
    } else if size >= 1024 && size.is_multiple_of(1024) {
        format!("{}KiB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// The inverse of [`chunk_label`].
pub fn parse_chunk_label(label: &str) -> Option<usize> {
    if let Some(mib) = label.strip_suffix("MiB") {
        mib.parse::<usize>().ok()?.checked_mul(1 << 20)
    } else if let Some(kib) = label.strip_suffix("KiB") {
        kib.parse::<usize>().ok()?.checked_mul(1024)
    } else {
        label.strip_suffix('B')?.parse().ok()
    }
}

/// What a WHATWG-exact decoder, and each competitor, must find in a corpus.
///
/// The generator counts these from the fields it writes, not by parsing its output, so
/// they are an independent check on every decoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Dispatched events: blocks ending in a blank line that had at least one `data`
    /// field, including SEP-1699 priming events whose one `data` field is empty.
    pub events: usize,
    /// The sum of the events' data lengths: `data` values joined with LF, without the
    /// final LF.
    pub data_bytes: usize,
    /// Comment lines (`:` first), the keep-alives.
    pub comments: usize,
    /// Valid `retry` fields.
    pub retry_fields: usize,
    /// Blocks with at least one valid `retry` field.
    pub retry_blocks: usize,
    /// Blocks that end in a blank line with an `event`, `id` or `retry` field but no
    /// `data` field (a `retry`-only block, say): WHATWG dispatches nothing for them.
    pub metadata_blocks: usize,
    /// CR and LF bytes in the corpus (a CRLF counts twice): what a `memchr2` scan finds.
    pub line_end_bytes: usize,
}

impl Expected {
    /// The counts of `copies` copies of a corpus, back to back. Every count is a sum over
    /// complete blocks (or lines), and a corpus ends with a complete block, so each one
    /// scales exactly.
    fn times(&self, copies: usize) -> Self {
        Self {
            events: self.events * copies,
            data_bytes: self.data_bytes * copies,
            comments: self.comments * copies,
            retry_fields: self.retry_fields * copies,
            retry_blocks: self.retry_blocks * copies,
            metadata_blocks: self.metadata_blocks * copies,
            line_end_bytes: self.line_end_bytes * copies,
        }
    }
}

/// What a decoder reported for one corpus; compare it with [`Expected::mcpwire`] and its
/// siblings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Events with data.
    pub events: usize,
    /// Total data bytes of those events.
    pub data_bytes: usize,
    /// Comments reported.
    pub comments: usize,
    /// `retry` values reported.
    pub retries: usize,
    /// Items without data (blocks of metadata only) reported.
    pub metadata_blocks: usize,
}

impl Expected {
    /// What `mcpwire`'s [`Decoder::poll_item`](mcpwire::sse::Decoder::poll_item) yields:
    /// every event (priming events with empty data included), one `Item::Comment` per
    /// comment line and one `Item::Retry` per valid `retry` field; a metadata-only block
    /// dispatches nothing (WHATWG).
    pub fn mcpwire(&self) -> Counts {
        Counts {
            events: self.events,
            data_bytes: self.data_bytes,
            comments: self.comments,
            retries: self.retry_fields,
            metadata_blocks: 0,
        }
    }

    /// What `sse-stream` 0.3's `SseByteStream` yields: one `Sse` per block that had any
    /// `data`, `event`, valid `id` or valid `retry` field ("raw blocks, including
    /// metadata-only blocks"), with `data: Some(..)` exactly for blocks with a `data`
    /// field (a priming event's empty data is `Some("")`) and `retry: Some(..)` for
    /// blocks with a valid `retry`. Comments are ignored and not reported.
    pub fn sse_stream(&self) -> Counts {
        Counts {
            events: self.events,
            data_bytes: self.data_bytes,
            comments: 0,
            retries: self.retry_blocks,
            metadata_blocks: self.metadata_blocks,
        }
    }

    /// What `eventsource-stream` 0.2's `EventStream` yields: an `Event` for every block
    /// whose data buffer is non-empty, which, as in WHATWG, is every block with a `data`
    /// field (priming events included, with empty data). Comments and metadata-only
    /// blocks are not reported; `retry` is only visible on dispatched events, so it is
    /// not counted.
    pub fn eventsource_stream(&self) -> Counts {
        Counts {
            events: self.events,
            data_bytes: self.data_bytes,
            comments: 0,
            retries: 0,
            metadata_blocks: 0,
        }
    }
}

/// A deterministic `text/event-stream` body and what decoding it must give.
///
/// The built-in corpora (1–4 MiB) fit in the last-level cache of the machines the benches
/// run on, so decoding them measures decoding from cache. [`out_of_cache`](Self::out_of_cache)
/// makes the same corpus long enough that it does not.
#[derive(Clone, Debug)]
pub struct Corpus {
    name: String,
    bytes: Bytes,
    expected: Expected,
}

impl Corpus {
    /// The names of the built-in corpora, in bench order. [`by_name`](Self::by_name) also
    /// knows their repetitions, `<name>-<length>` (see [`repeated_to`](Self::repeated_to)).
    pub const NAMES: [&'static str; 3] = ["large", "tokens", "mixed"];

    /// How long [`out_of_cache`](Self::out_of_cache) makes a corpus, at least: 64 MiB,
    /// twice the 32 MiB last-level cache of the project's bench machine (a cache that
    /// also holds the L2's victims, so a corpus of exactly its size could still largely
    /// hit), and more than most server CPUs' share of L3 per core complex.
    pub const OUT_OF_CACHE_LEN: usize = 64 << 20;

    /// The `large` corpus: 64 events whose data is one ≈ 64 KiB `tools/call` result on
    /// a single `data:` line (≈ 4 MiB). Every such line spans chunks, so this measures
    /// the carry of a long line and the UTF-8 check of its data.
    pub fn large() -> Self {
        Self::data_only("large", &Payloads::large())
    }

    /// The `tokens` corpus: ≈ 1 MiB of ≈ 120-byte `notifications/progress` events
    /// (`data: {...}` and a blank line), the shape of a streamed LLM response: this
    /// measures per-event overhead.
    pub fn tokens() -> Self {
        Self::data_only("tokens", &Payloads::tokens())
    }

    /// The `mixed` corpus (≈ 1 MiB): a legacy `endpoint` event, SEP-1699 priming events
    /// (an `id` and one empty `data`), JSON-RPC messages with `event:` and `id:`,
    /// pretty-printed JSON on many `data` lines, `: ping` keep-alives, `retry`-only
    /// blocks and the occasional 8–24 KiB result; a quarter of the blocks use CRLF line
    /// ends, the rest LF.
    pub fn mixed() -> Self {
        let mut rng = XorShift::new(0x006d_6978_6564);
        let mut w = Writer::default();
        w.event("endpoint");
        w.data("/messages?session_id=6f1c2a9e-3b7d-4c55-9a0e-2f8d1b4c7e60");
        w.end();
        w.id("s1:0");
        w.retry(3000);
        w.data("");
        w.end();
        let mut seq = 0u64;
        while w.out.len() < MIXED_LEN {
            seq += 1;
            let id = format!("s1:{seq}");
            w.crlf = rng.one_in(4);
            match rng.below(100) {
                // A JSON-RPC response on the POST stream.
                0..40 => {
                    w.event("message");
                    w.id(&id);
                    let len = rng.range(100, 1500);
                    w.data(&tool_result(&mut rng, seq, len));
                }
                // A progress notification, no id.
                40..60 => w.data(&progress(&mut rng, seq)),
                // Pretty-printed JSON: one `data` line per line (some empty).
                60..70 => {
                    w.id(&id);
                    w.data("{");
                    w.data("  \"jsonrpc\": \"2.0\",");
                    w.data(&format!("  \"id\": {seq},"));
                    w.data("  \"result\": {");
                    w.data("    \"content\": [");
                    for _ in 0..rng.range(1, 16) {
                        let mut text = String::new();
                        let target = rng.range(10, 120);
                        while text.len() < target {
                            text.push_str(rng.pick(PRETTY_WORDS));
                            text.push(' ');
                        }
                        w.data(&format!(
                            "      {{ \"type\": \"text\", \"text\": \"{}\" }},",
                            text.trim_end()
                        ));
                        if rng.one_in(8) {
                            w.data("");
                        }
                    }
                    w.data("    ]");
                    w.data("  }");
                    w.data("}");
                }
                // A keep-alive.
                70..80 => w.comment(" ping"),
                // A priming event (SEP-1699) on a new stream.
                80..85 => {
                    w.id(&format!("s{}:0", seq % 7 + 2));
                    if rng.one_in(2) {
                        w.retry(rng.range(500, 10_000) as u64);
                    }
                    w.data("");
                }
                // A `retry`-only block before the server closes a stream (RESUME-10).
                85..88 => w.retry(rng.range(1000, 30_000) as u64),
                // A server-to-client request.
                88..99 => {
                    w.event("message");
                    w.id(&id);
                    w.data(&format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":\"srv-{seq}\",\"method\":\"sampling/createMessage\",\
                         \"params\":{{\"messages\":[{{\"role\":\"user\",\"content\":{{\"type\":\"text\",\
                         \"text\":\"Summarize the diff\"}}}}],\"maxTokens\":{}}}}}",
                        rng.range(100, 4000)
                    ));
                }
                // A big tool result that spans 16 KiB chunks.
                _ => {
                    w.id(&id);
                    let len = rng.range(8 << 10, 24 << 10);
                    w.data(&tool_result(&mut rng, seq, len));
                }
            }
            w.end();
        }
        Self {
            name: "mixed".to_owned(),
            bytes: w.out.into(),
            expected: w.expected,
        }
    }

    /// The corpus called `name`: one of [`NAMES`](Self::NAMES), or such a name followed by
    /// `-` and a length label (`tokens-64MiB`), for that corpus
    /// [repeated to](Self::repeated_to) the length.
    pub fn by_name(name: &str) -> Option<Self> {
        let (base, min_len) = Self::parse_name(name)?;
        let corpus = match base {
            "large" => Self::large(),
            "tokens" => Self::tokens(),
            "mixed" => Self::mixed(),
            _ => return None,
        };
        Some(match min_len {
            Some(min_len) => corpus.repeated_to(min_len),
            None => corpus,
        })
    }

    /// Splits a corpus name as [`by_name`](Self::by_name) reads it, without generating
    /// anything: the built-in corpus it is made from and, for a repetition, the length it
    /// was repeated to. `"tokens"` is `("tokens", None)`, `"tokens-64MiB"` is
    /// `("tokens", Some(64 << 20))`; an unknown name is `None`.
    pub fn parse_name(name: &str) -> Option<(&'static str, Option<usize>)> {
        let (base, min_len) = match name.split_once('-') {
            Some((base, label)) => (base, Some(parse_chunk_label(label)?)),
            None => (name, None),
        };
        let base = Self::NAMES.into_iter().find(|known| *known == base)?;
        Some((base, min_len))
    }

    /// Every corpus, in bench order.
    pub fn all() -> Vec<Self> {
        vec![Self::large(), Self::tokens(), Self::mixed()]
    }

    /// This corpus repeated, back to back, until it is at least `min_len` bytes long, and
    /// named `<name>-<min_len label>` (`tokens-64MiB`). The copies are written into one
    /// new buffer, so a decoder reads `min_len` distinct bytes, not the same cached
    /// bytes again. The expected counts are this corpus's times the number of copies:
    /// every corpus ends with a complete block, so a copy decodes exactly as the
    /// original (only the last event id carries over, and no count depends on it).
    ///
    /// # Panics
    ///
    /// If the corpus does not end with a blank line.
    pub fn repeated_to(&self, min_len: usize) -> Self {
        assert!(
            self.bytes.ends_with(b"\n\n") || self.bytes.ends_with(b"\r\n\r\n"),
            "a corpus repeats exactly only if it ends with a complete block"
        );
        let copies = min_len.div_ceil(self.len()).max(1);
        let mut bytes = Vec::with_capacity(copies * self.len());
        for _ in 0..copies {
            bytes.extend_from_slice(&self.bytes);
        }
        Self {
            name: format!("{}-{}", self.name, chunk_label(min_len)),
            bytes: bytes.into(),
            expected: self.expected.times(copies),
        }
    }

    /// This corpus [repeated to](Self::repeated_to) [`OUT_OF_CACHE_LEN`](Self::OUT_OF_CACHE_LEN):
    /// decoding it measures a decoder reading from memory rather than from cache.
    pub fn out_of_cache(&self) -> Self {
        self.repeated_to(Self::OUT_OF_CACHE_LEN)
    }

    fn data_only(name: &str, payloads: &Payloads) -> Self {
        let mut w = Writer::default();
        for message in payloads.messages() {
            w.data(message);
            w.end();
        }
        Self {
            name: name.to_owned(),
            bytes: w.out.into(),
            expected: w.expected,
        }
    }

    /// The name, as used in bench group names: `tokens`, or `tokens-64MiB` for a
    /// repetition.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole body.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The body's length in bytes: the decode benches' throughput.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the body is empty (never, for the built-in corpora).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// What decoding the corpus must give.
    pub fn expected(&self) -> &Expected {
        &self.expected
    }

    /// The body split into consecutive chunks of `size` bytes (the last may be shorter),
    /// each a zero-copy slice of [`bytes`](Self::bytes). Make them before timing.
    ///
    /// # Panics
    ///
    /// If `size` is 0.
    pub fn chunks(&self, size: usize) -> Vec<Bytes> {
        assert!(size > 0, "chunk size must be positive");
        (0..self.bytes.len())
            .step_by(size)
            .map(|start| {
                self.bytes
                    .slice(start..(start + size).min(self.bytes.len()))
            })
            .collect()
    }
}

/// The `mixed` corpus is generated until it is at least this long: 1 MiB.
const MIXED_LEN: usize = 1 << 20;

const PRETTY_WORDS: &[&str] = &[
    "listing",
    "of",
    "src/",
    "main.rs",
    "lib.rs",
    "Cargo.toml",
    "3",
    "files",
    "changed",
    "12",
    "insertions(+)",
    "deletions(-)",
    "naïve",
    "½",
    "ok",
];

/// Writes an event stream field by field and counts what a decoder must find in it.
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    expected: Expected,
    /// Line ends are CRLF (else LF).
    crlf: bool,
    data_lines: usize,
    data_len: usize,
    has_metadata: bool,
    has_retry: bool,
}

impl Writer {
    fn line(&mut self, parts: &[&str]) {
        for part in parts {
            debug_assert!(!part.contains(['\r', '\n']), "{part:?}");
            self.out.extend_from_slice(part.as_bytes());
        }
        if self.crlf {
            self.out.extend_from_slice(b"\r\n");
            self.expected.line_end_bytes += 2;
        } else {
            self.out.push(b'\n');
            self.expected.line_end_bytes += 1;
        }
    }

    /// A `data` field; an empty value is written as `data:`, as encoders do. The space
    /// after the colon is the one a decoder strips, so a value may itself start with
    /// spaces (the indentation of pretty-printed JSON).
    fn data(&mut self, value: &str) {
        if value.is_empty() {
            self.line(&["data:"]);
        } else {
            self.line(&["data: ", value]);
        }
        self.data_lines += 1;
        self.data_len += value.len();
    }

    fn event(&mut self, event_type: &str) {
        self.line(&["event: ", event_type]);
        self.has_metadata = true;
    }

    fn id(&mut self, id: &str) {
        debug_assert!(!id.contains('\0'));
        self.line(&["id: ", id]);
        self.has_metadata = true;
    }

    fn retry(&mut self, ms: u64) {
        self.line(&["retry: ", &ms.to_string()]);
        self.expected.retry_fields += 1;
        self.has_retry = true;
        self.has_metadata = true;
    }

    fn comment(&mut self, text: &str) {
        self.line(&[":", text]);
        self.expected.comments += 1;
    }

    /// The blank line that ends a block.
    fn end(&mut self) {
        self.line(&[]);
        if self.data_lines > 0 {
            self.expected.events += 1;
            self.expected.data_bytes += self.data_len + (self.data_lines - 1);
        } else if self.has_metadata {
            self.expected.metadata_blocks += 1;
        }
        if self.has_retry {
            self.expected.retry_blocks += 1;
        }
        self.data_lines = 0;
        self.data_len = 0;
        self.has_metadata = false;
        self.has_retry = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode;

    #[test]
    fn corpora_have_the_stated_sizes() {
        let large = Corpus::large();
        assert!(large.len().abs_diff(4 << 20) < 4096, "{}", large.len());
        assert_eq!(large.expected().events, 64);
        for corpus in [Corpus::tokens(), Corpus::mixed()] {
            assert!((1 << 20..(1 << 20) + (64 << 10)).contains(&corpus.len()));
        }
        let tokens = Corpus::tokens();
        let per_event = tokens.len() / tokens.expected().events;
        assert!((100..170).contains(&per_event), "{per_event}");
        let mixed = Corpus::mixed().expected;
        assert!(
            mixed.comments > 100 && mixed.retry_blocks > 40 && mixed.metadata_blocks > 20,
            "{mixed:?}"
        );
    }

    #[test]
    fn chunks_cover_the_corpus_exactly() {
        let corpus = Corpus::mixed();
        for size in CHUNK_SIZES {
            let chunks = corpus.chunks(size);
            assert!(chunks[..chunks.len() - 1].iter().all(|c| c.len() == size));
            assert_eq!(chunks.concat(), corpus.bytes()[..]);
        }
    }

    #[test]
    fn line_end_count_matches_a_scan() {
        for corpus in Corpus::all() {
            let scanned = corpus
                .bytes()
                .iter()
                .filter(|&&b| b == b'\n' || b == b'\r')
                .count();
            assert_eq!(
                scanned,
                corpus.expected().line_end_bytes,
                "{}",
                corpus.name()
            );
        }
    }

    #[test]
    fn chunk_labels_round_trip() {
        for size in CHUNK_SIZES
            .into_iter()
            .chain([Corpus::OUT_OF_CACHE_LEN, 1 << 20])
        {
            assert_eq!(parse_chunk_label(&chunk_label(size)), Some(size));
        }
        assert_eq!(chunk_label(CHUNK_MSS), "1460B");
        assert_eq!(chunk_label(CHUNK_16K), "16KiB");
        assert_eq!(chunk_label(Corpus::OUT_OF_CACHE_LEN), "64MiB");
        assert_eq!(chunk_label(3 << 19), "1536KiB");
        assert_eq!(parse_chunk_label("64Mi"), None);
    }

    #[test]
    fn a_repeated_corpus_is_the_copies_and_expects_their_counts() {
        for corpus in Corpus::all() {
            let twice = corpus.repeated_to(corpus.len() + 1);
            assert_eq!(
                twice.name(),
                format!("{}-{}B", corpus.name(), corpus.len() + 1)
            );
            assert_eq!(
                twice.bytes()[..],
                [&corpus.bytes()[..], &corpus.bytes()[..]].concat()
            );
            assert_eq!(*twice.expected(), corpus.expected().times(2));
            assert_eq!(corpus.repeated_to(corpus.len()).len(), corpus.len());
        }
    }

    // The benches assert the 64 MiB repetitions; this checks, on two copies (one seam
    // between copies, where a wrong count would come from), that the scaled counts are
    // what every decoder really finds, through the same functions.
    #[test]
    fn every_decoder_finds_the_scaled_counts_in_a_repeated_corpus() {
        for corpus in Corpus::all() {
            let twice = corpus.repeated_to(corpus.len() + 1);
            let expected = twice.expected();
            assert_eq!(expected.events, 2 * corpus.expected().events);
            let chunks = twice.chunks(CHUNK_16K);
            let what = twice.name();
            assert_eq!(decode::mcpwire(&chunks), expected.mcpwire(), "{what}");
            assert_eq!(decode::mcpwire_ref(&chunks), expected.mcpwire(), "{what}");
            assert_eq!(decode::sse_stream(&chunks), expected.sse_stream(), "{what}");
            assert_eq!(
                decode::eventsource_stream(&chunks),
                expected.eventsource_stream(),
                "{what}"
            );
            assert_eq!(
                decode::memchr2_line_ends(&chunks),
                expected.line_end_bytes,
                "{what}"
            );
        }
    }

    #[test]
    fn out_of_cache_names_parse_back_to_their_corpus() {
        assert_eq!(Corpus::parse_name("tokens"), Some(("tokens", None)));
        assert_eq!(
            Corpus::parse_name("tokens-64MiB"),
            Some(("tokens", Some(Corpus::OUT_OF_CACHE_LEN)))
        );
        assert_eq!(Corpus::parse_name("tokens-64"), None);
        assert_eq!(Corpus::parse_name("huge"), None);
        let tokens = Corpus::tokens();
        let out_of_cache = tokens.out_of_cache();
        assert_eq!(out_of_cache.name(), "tokens-64MiB");
        assert!(out_of_cache.len() >= Corpus::OUT_OF_CACHE_LEN);
        assert!(out_of_cache.len() < Corpus::OUT_OF_CACHE_LEN + tokens.len());
        let by_name = Corpus::by_name("tokens-2MiB").expect("a known name");
        assert_eq!(by_name.bytes(), tokens.repeated_to(2 << 20).bytes());
        assert_eq!(by_name.expected(), &tokens.expected().times(2));
    }
}
