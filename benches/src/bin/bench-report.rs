//! `bench-report`: criterion's results for the SSE benches as markdown tables.
//!
//! Reads every `<group>/<function>/new/benchmark.json` (group id, function id,
//! throughput) and `new/estimates.json` (the mean's point estimate, in ns) under
//! criterion's output directory and prints one table per group: implementation, mean
//! time, MiB/s, events/s, and the time relative to `sse-stream` and to the group's floor
//! (`memchr2-floor` for `decode/…` groups, `memcpy-floor` for `encode/…` groups). Ratios
//! are of mean times, so lower is better: 0.50 means twice as fast.
//!
//! Event counts come from regenerating the corpus named in the group id
//! (`decode/<corpus>/<chunk>`: its WHATWG events; `encode/<payloads>`: its messages), which
//! is deterministic.
//!
//! Decode groups come in two kinds, and each heading says which: the built-in corpora
//! (1–4 MiB) decode from cache, and their repetitions to 64 MiB
//! (`decode/<corpus>-64MiB/<chunk>`, see `Corpus::out_of_cache`) from memory. The
//! in-cache groups are printed first, then the out-of-cache ones, then the encode groups.
//!
//! Usage: `cargo run -p mcpwire-benches --bin bench-report [-- CRITERION_DIR]`; the
//! directory defaults to `$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else the
//! workspace's `target/criterion`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{env, fs};

use mcpwire_benches::{CHUNK_SIZES, Corpus, Payloads, chunk_label, parse_chunk_label};
use serde_json::Value;

/// One measured function.
struct Measurement {
    function: String,
    mean_ns: f64,
    bytes: Option<u64>,
}

fn criterion_dir() -> PathBuf {
    if let Some(dir) = env::args_os().nth(1) {
        return dir.into();
    }
    if let Some(home) = env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("criterion")
}

/// Every directory under `dir` that holds `new/benchmark.json`.
fn find_benchmarks(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|name| name == "new") {
            if path.join("benchmark.json").is_file() {
                out.push(path);
            }
        } else {
            find_benchmarks(&path, out);
        }
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads one `new/` directory: `(group id, measurement)`.
fn read_measurement(new: &Path) -> Result<(String, Measurement), String> {
    let benchmark = read_json(&new.join("benchmark.json"))?;
    let estimates = read_json(&new.join("estimates.json"))?;
    let group = benchmark["group_id"]
        .as_str()
        .ok_or_else(|| format!("{}: no group_id", new.display()))?
        .to_owned();
    let function = benchmark["function_id"]
        .as_str()
        .unwrap_or("(none)")
        .to_owned();
    let mean_ns = estimates["mean"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{}: no mean point estimate", new.display()))?;
    let throughput = &benchmark["throughput"];
    let bytes = ["Bytes", "BytesDecimal"]
        .iter()
        .find_map(|unit| throughput[unit].as_u64());
    Ok((
        group,
        Measurement {
            function,
            mean_ns,
            bytes,
        },
    ))
}

/// Sort key of a group: in-cache decode groups in corpus and chunk order, then the
/// out-of-cache decode groups in the same order, then encode groups.
fn group_order(group: &str) -> (usize, usize, usize, String) {
    let parts: Vec<&str> = group.split('/').collect();
    match parts.as_slice() {
        ["decode", corpus_name, chunk] => {
            let chunk = parse_chunk_label(chunk)
                .and_then(|size| CHUNK_SIZES.iter().position(|s| *s == size))
                .unwrap_or(usize::MAX);
            let (kind, corpus) = match Corpus::parse_name(corpus_name) {
                Some((base, min_len)) => (
                    usize::from(min_len.is_some()),
                    Corpus::NAMES
                        .iter()
                        .position(|n| *n == base)
                        .unwrap_or(usize::MAX),
                ),
                None => (1, usize::MAX),
            };
            (kind, corpus, chunk, group.into())
        }
        ["encode", name] => {
            let index = Payloads::NAMES.iter().position(|n| n == name);
            (2, index.unwrap_or(usize::MAX), 0, group.into())
        }
        _ => (3, 0, 0, group.into()),
    }
}

/// What a group's heading adds to its id: whether a decode group reads its corpus from
/// cache or from memory.
fn group_label(group: &str) -> Option<String> {
    let corpus = group.strip_prefix("decode/")?.split('/').next()?;
    Some(match Corpus::parse_name(corpus)? {
        (_, None) => "in cache".to_owned(),
        (base, Some(min_len)) => {
            format!(
                "out of cache: `{base}` repeated to {}",
                chunk_label(min_len)
            )
        }
    })
}

/// Row order within a group: the implementation first, then its peers, then the floors.
fn function_order(function: &str) -> (usize, String) {
    const ORDER: [&str; 8] = [
        "mcpwire",
        "mcpwire-ref",
        "sse-stream",
        "eventsource-stream",
        "naive-format",
        "memchr2-floor",
        "utf8-floor",
        "memcpy-floor",
    ];
    let index = ORDER.iter().position(|f| *f == function);
    (index.unwrap_or(ORDER.len()), function.into())
}

/// The number of events one iteration of `group` handles, if the group is one of ours.
fn events_of(group: &str, cache: &mut BTreeMap<String, Option<usize>>) -> Option<usize> {
    let parts: Vec<&str> = group.split('/').collect();
    let key = parts[..parts.len().min(2)].join("/");
    *cache.entry(key).or_insert_with(|| match parts.as_slice() {
        ["decode", corpus, _] => Corpus::by_name(corpus).map(|c| c.expected().events),
        ["encode", name] => Payloads::by_name(name).map(|p| p.len()),
        _ => None,
    })
}

fn format_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn format_rate(per_second: f64) -> String {
    if per_second >= 1e9 {
        format!("{:.2} G", per_second / 1e9)
    } else if per_second >= 1e6 {
        format!("{:.2} M", per_second / 1e6)
    } else if per_second >= 1e3 {
        format!("{:.1} k", per_second / 1e3)
    } else {
        format!("{per_second:.0}")
    }
}

fn main() -> ExitCode {
    let dir = criterion_dir();
    let dir = fs::canonicalize(&dir).unwrap_or(dir);
    let mut found = Vec::new();
    find_benchmarks(&dir, &mut found);
    if found.is_empty() {
        eprintln!(
            "bench-report: no criterion results under {} (run `cargo bench -p mcpwire-benches` \
             first, or pass the criterion directory)",
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    let mut groups: BTreeMap<(usize, usize, usize, String), Vec<Measurement>> = BTreeMap::new();
    for new in &found {
        match read_measurement(new) {
            Ok((group, measurement)) => groups
                .entry(group_order(&group))
                .or_default()
                .push(measurement),
            Err(e) => {
                eprintln!("bench-report: {e}");
                return ExitCode::FAILURE;
            }
        }
    }

    let mut events_cache = BTreeMap::new();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Mean times from {}. Ratios are of mean times: lower is better. Decode groups \
         marked in cache decode a 1–4 MiB corpus, which stays in the last-level cache from \
         one iteration to the next; those marked out of cache decode the same corpus \
         repeated to {}, which is read from memory.",
        dir.display(),
        chunk_label(Corpus::OUT_OF_CACHE_LEN)
    );
    for ((_, _, _, group), mut rows) in groups {
        rows.sort_by_key(|m| function_order(&m.function));
        let floor_name = if group.starts_with("encode/") {
            "memcpy-floor"
        } else {
            "memchr2-floor"
        };
        let mean_of = |name: &str| rows.iter().find(|m| m.function == name).map(|m| m.mean_ns);
        let (peer, floor) = (mean_of("sse-stream"), mean_of(floor_name));
        let events = events_of(&group, &mut events_cache);

        out.push('\n');
        let label = group_label(&group).map_or_else(String::new, |label| format!(" ({label})"));
        let _ = writeln!(out, "### {group}{label}");
        out.push('\n');
        let _ = writeln!(
            out,
            "| implementation | mean | MiB/s | events/s | time / sse-stream | time / {floor_name} |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for m in &rows {
            let seconds = m.mean_ns / 1e9;
            let mib_s = m.bytes.map_or("–".into(), |bytes| {
                format!("{:.0}", bytes as f64 / seconds / f64::from(1u32 << 20))
            });
            let events_s = events.map_or("–".into(), |n| format_rate(n as f64 / seconds));
            let ratio =
                |base: Option<f64>| base.map_or("–".into(), |b| format!("{:.2}", m.mean_ns / b));
            let _ = writeln!(
                out,
                "| {} | {} | {mib_s} | {events_s} | {} | {} |",
                m.function,
                format_time(m.mean_ns),
                ratio(peer),
                ratio(floor),
            );
        }
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}
