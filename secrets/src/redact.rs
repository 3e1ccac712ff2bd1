//! Redaction of known secret values from every byte the broker passes on: to
//! the agent (and so the model), to the audit log, to the operator's console
//! and to saved outputs.
//!
//! Each secret value is searched for as itself and in the forms a command can
//! trivially turn it into: base64 and base64url (padded and unpadded, and the
//! stable middle of its encoding at the two other 3-byte alignments, so the
//! value is found inside a longer base64 stream), hex (lower and upper case,
//! packed and as space-separated bytes), hex dumps across lines as `od -tx1`,
//! `od -An -tx1`, `hexdump -C` and `xxd` print them (offset and ASCII columns
//! included), URL-encoding (`%XX` upper and lower case, `+` for a space, and
//! every byte `%XX`), and the JSON string escape (also `\uXXXX` in either
//! case and `\/`). A value of 16 bytes or more is also masked by any run of
//! 12 or more of its consecutive bytes (`cut -c`, `head -c`). Every match is
//! replaced by the secret's placeholder `{{secret:name}}` (or a chosen
//! replacement, such as the masked API key) and counted.
//!
//! Matching is leftmost-longest over all patterns: a table indexed by the first
//! two bytes of a pattern gives the few candidates starting there (longest
//! first), so the scan does two table reads per input byte and compares bytes
//! only where a pattern can start; runs and dumps have a bitmap of their own
//! first two bytes in front of their lookup. Every position is decided from
//! at most `max_len` bytes after it. [`StreamRedactor`] keeps the last
//! `longest pattern - 1` bytes of a chunk back until the next one arrives, so a
//! value split across two reads is still found, and its output is exactly what
//! the one-shot redaction of the whole stream would give.
//!
//! What this cannot see: a value transformed any other way (reversed, split by
//! line breaks as `xxd`/`base64 -w` wrap it, compressed, encrypted). The
//! defences for those are elsewhere: secrets are delivered only where their
//! scope allows (`secrets.rs`), and the files they are written to should not be
//! readable by other actions.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One value to hide and what replaces it.
pub struct RedactEntry {
    /// The name shown in counts (the secret's name, or e.g. `API_KEY`).
    pub label: String,
    value: Vec<u8>,
    replacement: Vec<u8>,
}

impl RedactEntry {
    /// A secret replaced by `{{secret:name}}`.
    pub fn secret(name: &str, value: &[u8]) -> RedactEntry {
        RedactEntry {
            label: name.to_string(),
            value: value.to_vec(),
            replacement: format!("{{{{secret:{name}}}}}").into_bytes(),
        }
    }

    /// A value replaced by a fixed text (e.g. the API key by its masked form).
    pub fn with_replacement(label: &str, value: &[u8], replacement: &str) -> RedactEntry {
        RedactEntry {
            label: label.to_string(),
            value: value.to_vec(),
            replacement: replacement.as_bytes().to_vec(),
        }
    }
}

impl Drop for RedactEntry {
    fn drop(&mut self) {
        wipe(&mut self.value);
    }
}

impl std::fmt::Debug for RedactEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedactEntry({}, {} bytes)", self.label, self.value.len())
    }
}

/// Overwrites a buffer that held secret material before it is freed.
pub fn wipe(bytes: &mut Vec<u8>) {
    for b in bytes.iter_mut() {
        *b = 0;
    }
    std::hint::black_box(&bytes);
    bytes.clear();
}

/// How many replacements were made, per label.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RedactionCounts {
    pub by_label: BTreeMap<String, u64>,
}

impl RedactionCounts {
    pub fn total(&self) -> u64 {
        self.by_label.values().sum()
    }
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
    pub fn add(&mut self, other: &RedactionCounts) {
        for (k, v) in &other.by_label {
            *self.by_label.entry(k.clone()).or_insert(0) += v;
        }
    }
}

/// The output and counts of one masking pass, reused across the strings
/// of a JSON value.
struct Scratch {
    out: Vec<u8>,
    counts: Vec<u64>,
}

impl Scratch {
    /// The masked text (patterns are whole UTF-8 sequences, so it is valid
    /// UTF-8; lossily converted if not).
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
}

struct Pattern {
    bytes: Vec<u8>,
    entry: usize,
}

/// An immutable set of values to redact; cheap to share (`Arc`).
pub struct Redactor {
    patterns: Vec<Pattern>,
    labels: Vec<String>,
    replacements: Vec<Vec<u8>>,
    /// CSR index by the first two bytes: candidates for key k are
    /// `cands[starts[k]..starts[k + 1]]`, longest first.
    starts: Vec<u32>,
    /// One bit per two-byte key that starts some pattern (8 KiB, stays in L1).
    present: Vec<u64>,
    has_single: bool,
    cands: Vec<u32>,
    /// One-byte patterns by their byte (u32::MAX: none).
    single: [u32; 256],
    max_len: usize,
    /// The values themselves (for hex dumps and partial runs), by entry.
    values: Vec<Vec<u8>>,
    /// Entries by value length, longest first (hex dump matching).
    by_len: Vec<usize>,
    /// One bit per first two bytes of some value: where a hex dump decode
    /// is worth continuing.
    dump_present: Vec<u64>,
    longest_value: usize,
    /// Windows of [`FRAGMENT_MIN`] bytes of every value of at least
    /// [`FRAGMENT_SECRET_MIN`] bytes: hash → (entry, offset).
    fragments: std::collections::HashMap<u64, (u32, u32), BuildMix>,
    /// One bit per first two bytes of an indexed window (cheap pre-check).
    fragment_present: Vec<u64>,
}

impl Drop for Redactor {
    fn drop(&mut self) {
        for p in &mut self.patterns {
            wipe(&mut p.bytes);
        }
        for v in &mut self.values {
            wipe(v);
        }
    }
}

/// A run of at least this many bytes of a long value is masked on its own
/// (`cut -c`, `head -c`, a value split over lines by hand).
pub const FRAGMENT_MIN: usize = 12;
/// Values at least this long are masked by their runs too.
pub const FRAGMENT_SECRET_MIN: usize = 16;
/// At most this many windows are indexed in all; past it, windows are
/// indexed every few bytes (runs slightly longer than [`FRAGMENT_MIN`] are
/// then needed), which bounds the index at a few MiB for 1 MiB of values.
const MAX_FRAGMENT_WINDOWS: usize = 1 << 18;
/// A hex dump of a value spans at most this many bytes per value byte
/// (offset columns, ASCII columns and spacing included), plus a line.
const DUMP_BYTES_PER_BYTE: usize = 8;
const DUMP_SLACK: usize = 256;

/// Hashes a 64-bit key that is already a mix (see [`window_hash`]).
#[derive(Default, Clone, Copy)]
struct BuildMix;

#[derive(Default)]
struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl std::hash::BuildHasher for BuildMix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

/// A cheap, well-spread hash of one [`FRAGMENT_MIN`]-byte window.
fn window_hash(w: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&w[..8]);
    b[..4].copy_from_slice(&w[8..12]);
    let x = u64::from_le_bytes(a).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from_le_bytes(b).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^ (x >> 29)
}

fn bit(set: &[u64], k: usize) -> bool {
    set[k >> 6] & (1 << (k & 63)) != 0
}

fn set_bit(set: &mut [u64], k: usize) {
    set[k >> 6] |= 1 << (k & 63);
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Redactor({} values, {} patterns)",
            self.labels.len(),
            self.patterns.len()
        )
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(Vec::new())
    }
}

impl Redactor {
    /// Builds the patterns of every entry (the value and its encodings).
    pub fn new(entries: Vec<RedactEntry>) -> Redactor {
        let mut patterns: Vec<Pattern> = Vec::new();
        let mut labels = Vec::new();
        let mut replacements = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            labels.push(e.label.clone());
            replacements.push(e.replacement.clone());
            for bytes in forms(&e.value) {
                if !bytes.is_empty() && !patterns.iter().any(|p| p.bytes == bytes) {
                    patterns.push(Pattern { bytes, entry: i });
                }
            }
        }
        // Longest first, so the first candidate that matches is the longest.
        patterns.sort_by(|a, b| {
            b.bytes
                .len()
                .cmp(&a.bytes.len())
                .then(a.entry.cmp(&b.entry))
        });
        let mut single = [u32::MAX; 256];
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); 1 << 16];
        for (i, p) in patterns.iter().enumerate() {
            if p.bytes.len() == 1 {
                if single[usize::from(p.bytes[0])] == u32::MAX {
                    single[usize::from(p.bytes[0])] = i as u32;
                }
            } else {
                buckets[key(p.bytes[0], p.bytes[1])].push(i as u32);
            }
        }
        let mut present = vec![0u64; 1 << 10];
        for (k, b) in buckets.iter().enumerate() {
            if !b.is_empty() {
                present[k >> 6] |= 1 << (k & 63);
            }
        }
        let has_single = single.iter().any(|s| *s != u32::MAX);
        let mut starts = Vec::with_capacity((1 << 16) + 1);
        let mut cands = Vec::new();
        for b in &buckets {
            starts.push(cands.len() as u32);
            cands.extend_from_slice(b);
        }
        starts.push(cands.len() as u32);
        let values: Vec<Vec<u8>> = entries.iter().map(|e| e.value.clone()).collect();
        let mut by_len: Vec<usize> = (0..values.len())
            .filter(|i| values[*i].len() >= 2)
            .collect();
        by_len.sort_by(|a, b| values[*b].len().cmp(&values[*a].len()).then(a.cmp(b)));
        let mut dump_present = vec![0u64; 1 << 10];
        for &i in &by_len {
            set_bit(&mut dump_present, key(values[i][0], values[i][1]));
        }
        let longest_value = values.iter().map(Vec::len).max().unwrap_or(0);
        let long_bytes: usize = values
            .iter()
            .filter(|v| v.len() >= FRAGMENT_SECRET_MIN)
            .map(Vec::len)
            .sum();
        let stride = long_bytes.div_ceil(MAX_FRAGMENT_WINDOWS).max(1);
        let mut fragments = std::collections::HashMap::with_hasher(BuildMix);
        let mut fragment_present = vec![0u64; 1 << 10];
        for (i, v) in values.iter().enumerate() {
            if v.len() < FRAGMENT_SECRET_MIN {
                continue;
            }
            let mut o = 0;
            while o + FRAGMENT_MIN <= v.len() {
                // Runs start on a character: a masked run never leaves half
                // of a UTF-8 sequence behind.
                if !is_continuation(v[o]) {
                    fragments
                        .entry(window_hash(&v[o..o + FRAGMENT_MIN]))
                        .or_insert((i as u32, o as u32));
                    set_bit(&mut fragment_present, key(v[o], v[o + 1]));
                }
                o += stride;
            }
        }
        let dump_len = if longest_value >= 2 {
            longest_value * DUMP_BYTES_PER_BYTE + DUMP_SLACK
        } else {
            0
        };
        let max_len = patterns
            .iter()
            .map(|p| p.bytes.len())
            .max()
            .unwrap_or(0)
            .max(dump_len);
        Redactor {
            patterns,
            labels,
            replacements,
            starts,
            present,
            has_single,
            cands,
            single,
            max_len,
            values,
            by_len,
            dump_present,
            longest_value,
            fragments,
            fragment_present,
        }
    }

    /// The longest run of a long value starting at `at`, if at least
    /// [`FRAGMENT_MIN`] bytes: (entry, length).
    fn fragment_at(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        if self.fragments.is_empty() || at + FRAGMENT_MIN > end {
            return None;
        }
        if !bit(&self.fragment_present, key(buf[at], buf[at + 1])) {
            return None;
        }
        let w = &buf[at..at + FRAGMENT_MIN];
        let &(entry, offset) = self.fragments.get(&window_hash(w))?;
        let (entry, offset) = (entry as usize, offset as usize);
        let v = &self.values[entry];
        if &v[offset..offset + FRAGMENT_MIN] != w {
            return None;
        }
        let mut len = FRAGMENT_MIN;
        while at + len < end && offset + len < v.len() && buf[at + len] == v[offset + len] {
            len += 1;
        }
        // End on a character boundary of the value.
        while len > FRAGMENT_MIN && offset + len < v.len() && is_continuation(v[offset + len]) {
            len -= 1;
        }
        Some((entry, len))
    }

    /// A value written as a hex dump starting at `at` — `od -tx1`,
    /// `od -An -tx1`, `hexdump -C`, `xxd`, spaced or packed pairs, across
    /// lines with their offset and ASCII columns: (entry, source length).
    /// When the dump crosses a line, the rest of its last line (its ASCII
    /// column shows the value's tail) is included.
    fn dump_at(&self, buf: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
        if self.by_len.is_empty() || !buf[at].is_ascii_hexdigit() {
            return None;
        }
        let mut d = DumpDecoder::new(buf, at, end);
        let b0 = d.next_byte()?;
        let end0 = d.pos;
        let b1 = d.next_byte()?;
        if !bit(&self.dump_present, key(b0, b1)) {
            return None;
        }
        d.record = true;
        d.decoded.extend_from_slice(&[b0, b1]);
        d.ends.extend_from_slice(&[end0, d.pos]);
        while d.decoded.len() < self.longest_value && d.next_byte().is_some() {}
        for &e in &self.by_len {
            let v = &self.values[e];
            if d.decoded.len() >= v.len() && d.decoded[..v.len()] == v[..] {
                let mut stop = d.ends[v.len() - 1];
                if buf[at..stop].contains(&b'\n') {
                    let line_end = buf[stop..end]
                        .iter()
                        .take(160)
                        .position(|c| *c == b'\n')
                        .map(|p| stop + p);
                    if let Some(le) = line_end {
                        stop = le;
                    }
                }
                wipe(&mut d.decoded);
                return Some((e, stop - at));
            }
        }
        wipe(&mut d.decoded);
        None
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The longest pattern: a stream keeps this many bytes minus one back.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Number of patterns searched (values times their distinct encodings).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Redacts a whole buffer.
    pub fn redact_bytes(&self, input: &[u8]) -> (Vec<u8>, RedactionCounts) {
        let mut counts = vec![0u64; self.labels.len()];
        let mut out = Vec::with_capacity(input.len());
        if self.is_empty() {
            out.extend_from_slice(input);
        } else {
            let end = self.scan(input, input.len(), &mut out, &mut counts);
            out.extend_from_slice(&input[end..]);
        }
        (out, self.counts(&counts))
    }

    /// Redacts a string. Patterns are whole UTF-8 sequences, so the result is
    /// valid UTF-8 too.
    pub fn redact_str(&self, input: &str) -> (String, RedactionCounts) {
        if self.is_empty() {
            return (input.to_string(), RedactionCounts::default());
        }
        let (bytes, counts) = self.redact_bytes(input.as_bytes());
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        (text, counts)
    }

    /// Redacts every string (and object key) of a JSON value in place, e.g. an
    /// audit record before it is written. A string or key with nothing to
    /// mask is left as it is: no copy, no rebuilt map (every audit record
    /// passes through here, almost always unchanged).
    pub fn redact_json(&self, value: &mut serde_json::Value) -> RedactionCounts {
        let mut total = RedactionCounts::default();
        if !self.is_empty() {
            let mut scratch = Scratch {
                out: Vec::new(),
                counts: vec![0; self.labels.len()],
            };
            self.redact_json_inner(value, &mut scratch, &mut total);
        }
        total
    }

    fn redact_json_inner(
        &self,
        value: &mut serde_json::Value,
        scratch: &mut Scratch,
        total: &mut RedactionCounts,
    ) {
        use serde_json::Value;
        match value {
            Value::String(s) if self.redact_into(s.as_bytes(), scratch) => {
                *s = scratch.text();
                total.add(&self.counts(&scratch.counts));
            }
            Value::Array(items) => {
                for v in items {
                    self.redact_json_inner(v, scratch, total);
                }
            }
            Value::Object(map) => {
                for v in map.values_mut() {
                    self.redact_json_inner(v, scratch, total);
                }
                if !map.keys().any(|k| self.redact_into(k.as_bytes(), scratch)) {
                    return;
                }
                // A key holds a value: rebuild the map with every key masked
                // (two keys that mask alike keep the later one's value).
                let old = std::mem::take(map);
                for (k, v) in old {
                    let k = if self.redact_into(k.as_bytes(), scratch) {
                        total.add(&self.counts(&scratch.counts));
                        scratch.text()
                    } else {
                        k
                    };
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }

    /// Masks `input` into `scratch` (its output and counts, both reused);
    /// true when anything was masked.
    fn redact_into(&self, input: &[u8], scratch: &mut Scratch) -> bool {
        scratch.out.clear();
        scratch.counts.fill(0);
        let end = self.scan(input, input.len(), &mut scratch.out, &mut scratch.counts);
        scratch.out.extend_from_slice(&input[end..]);
        scratch.counts.iter().any(|n| *n > 0)
    }

    /// A streaming redactor over this set.
    pub fn stream(self: &Arc<Self>) -> StreamRedactor {
        StreamRedactor::new(Arc::clone(self))
    }

    fn counts(&self, raw: &[u64]) -> RedactionCounts {
        let mut c = RedactionCounts::default();
        for (i, n) in raw.iter().enumerate() {
            if *n > 0 {
                *c.by_label.entry(self.labels[i].clone()).or_insert(0) += n;
            }
        }
        c
    }

    /// Scans `buf`, deciding every position before `limit`; writes the output
    /// for everything consumed and returns the first unconsumed position
    /// (≥ `limit` unless the buffer ended). Mid-stream the caller passes
    /// `limit = buf.len() - (max_len - 1)`, so every pattern starting before
    /// `limit` is compared in full; at the end, `limit = buf.len()`.
    fn scan(&self, buf: &[u8], limit: usize, out: &mut Vec<u8>, counts: &mut [u64]) -> usize {
        let mut i = 0usize;
        let mut emitted = 0usize;
        let n = buf.len();
        while i < limit {
            let mut hit: Option<usize> = None;
            if i + 1 < n {
                let k = key(buf[i], buf[i + 1]);
                if self.present[k >> 6] & (1 << (k & 63)) != 0 {
                    let (a, b) = (self.starts[k] as usize, self.starts[k + 1] as usize);
                    for &pi in &self.cands[a..b] {
                        let p = &self.patterns[pi as usize].bytes;
                        if buf[i..].starts_with(p) {
                            hit = Some(pi as usize);
                            break;
                        }
                    }
                }
            }
            if hit.is_none() && self.has_single {
                let s = self.single[usize::from(buf[i])];
                if s != u32::MAX {
                    hit = Some(s as usize);
                }
            }
            // A position is decided from at most `max_len` bytes, so that a
            // stream gives exactly what the one-shot pass gives.
            let window_end = n.min(i + self.max_len);
            let mut best = hit.map(|pi| (self.patterns[pi].entry, self.patterns[pi].bytes.len()));
            for other in [
                self.fragment_at(buf, i, window_end),
                self.dump_at(buf, i, window_end),
            ]
            .into_iter()
            .flatten()
            {
                if best.is_none_or(|(_, len)| other.1 > len) {
                    best = Some(other);
                }
            }
            match best {
                Some((entry, len)) => {
                    out.extend_from_slice(&buf[emitted..i]);
                    out.extend_from_slice(&self.replacements[entry]);
                    counts[entry] += 1;
                    i += len;
                    emitted = i;
                }
                None => i += 1,
            }
        }
        out.extend_from_slice(&buf[emitted..i.min(n)]);
        i.min(n)
    }
}

fn key(a: u8, b: u8) -> usize {
    (usize::from(a) << 8) | usize::from(b)
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Reads bytes written as hex pairs the way dump tools lay them out: pairs
/// packed or one space apart (`xxd` groups, `od`), two spaces after the 8th
/// byte of a line (`hexdump -C`), an ASCII column after a wider gap or a
/// `|` (skipped to the end of the line), and at the start of each further
/// line an optional offset column (6+ hex/octal digits, then `:` or a
/// space). Every step is bounded, so the whole decode reads at most `end`.
struct DumpDecoder<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    on_line: usize,
    /// Bytes read so far (also before `decoded` is filled).
    count: usize,
    /// False until the first bytes looked promising: most hex text is not
    /// a dump of a value, and is judged without allocating.
    record: bool,
    decoded: Vec<u8>,
    /// Where each decoded byte's pair ends in `buf`.
    ends: Vec<usize>,
}

impl<'a> DumpDecoder<'a> {
    fn new(buf: &'a [u8], at: usize, end: usize) -> DumpDecoder<'a> {
        DumpDecoder {
            buf,
            pos: at,
            end,
            on_line: 0,
            count: 0,
            record: false,
            decoded: Vec::new(),
            ends: Vec::new(),
        }
    }

    fn at(&self, p: usize) -> Option<u8> {
        (p < self.end).then(|| self.buf[p])
    }

    fn pair(&self, p: usize) -> Option<u8> {
        let hi = hex_value(self.at(p)?)?;
        let lo = hex_value(self.at(p + 1)?)?;
        Some((hi << 4) | lo)
    }

    /// Skips what separates two pairs; false when the dump ends here.
    fn separator(&mut self) -> bool {
        if self.count == 0 {
            return true;
        }
        let mut p = self.pos;
        let mut spaces = 0;
        while self.at(p) == Some(b' ') && spaces < 4 {
            p += 1;
            spaces += 1;
        }
        // Two spaces: `hexdump -C`'s gap after the 8th byte (the decode may
        // have started mid-line, so also when a pair and a separator
        // follow), else the gap before `xxd`'s ASCII column.
        let gap = spaces == 2
            && (self.on_line == 8
                || (self.pair(p).is_some() && matches!(self.at(p + 2), Some(b' ' | b'\n'))));
        let ascii_column = self.at(p) == Some(b'|') || spaces >= 3 || (spaces == 2 && !gap);
        if self.at(p) == Some(b'\n') || ascii_column {
            // The rest of the line is an ASCII column (or nothing): the dump
            // goes on at the next line, after its offset column.
            let mut q = p;
            let mut skipped = 0;
            while self.at(q).is_some_and(|c| c != b'\n') {
                q += 1;
                skipped += 1;
                if skipped > 128 {
                    return false;
                }
            }
            if self.at(q) != Some(b'\n') {
                return false;
            }
            q += 1;
            while self.at(q) == Some(b' ') && q - p < 160 {
                q += 1;
            }
            let digits = (q..self.end.min(q + 17))
                .take_while(|&r| self.buf[r].is_ascii_hexdigit())
                .count();
            if digits >= 6 && matches!(self.at(q + digits), Some(b':' | b' ')) {
                q += digits + 1;
                while self.at(q) == Some(b' ') && q - p < 200 {
                    q += 1;
                }
            }
            self.pos = q;
            self.on_line = 0;
            return self.pair(q).is_some();
        }
        self.pos = p;
        spaces <= 2
    }

    fn next_byte(&mut self) -> Option<u8> {
        if !self.separator() {
            return None;
        }
        let b = self.pair(self.pos)?;
        self.pos += 2;
        self.on_line += 1;
        self.count += 1;
        if self.record {
            self.decoded.push(b);
            self.ends.push(self.pos);
        }
        Some(b)
    }
}

/// Redaction of a stream that arrives in chunks (an action's stdout or stderr).
pub struct StreamRedactor {
    redactor: Arc<Redactor>,
    /// Bytes not yet emitted start at `start`; the part before it is
    /// compacted away once it is at least half the buffer, so each byte is
    /// moved a bounded number of times however small the chunks are.
    buf: Vec<u8>,
    start: usize,
    counts: Vec<u64>,
}

impl Drop for StreamRedactor {
    fn drop(&mut self) {
        wipe(&mut self.buf);
    }
}

impl StreamRedactor {
    pub fn new(redactor: Arc<Redactor>) -> StreamRedactor {
        let n = redactor.labels.len();
        StreamRedactor {
            redactor,
            buf: Vec::new(),
            start: 0,
            counts: vec![0; n],
        }
    }

    /// Takes the next chunk; returns the redacted bytes that are final now. Up
    /// to `max_len - 1` bytes stay held back for the next call or `finish`.
    pub fn push(&mut self, data: &[u8]) -> Vec<u8> {
        let r = Arc::clone(&self.redactor);
        if r.is_empty() {
            return data.to_vec();
        }
        self.buf.extend_from_slice(data);
        let keep = r.max_len - 1;
        let pending = self.buf.len() - self.start;
        if pending <= keep {
            return Vec::new();
        }
        let limit = pending - keep;
        let mut out = Vec::with_capacity(limit + 64);
        let end = r.scan(&self.buf[self.start..], limit, &mut out, &mut self.counts);
        self.start += end;
        if self.start >= 4096 && self.start * 2 >= self.buf.len() {
            for b in &mut self.buf[..self.start] {
                *b = 0;
            }
            self.buf.drain(..self.start);
            self.start = 0;
        }
        out
    }

    /// The end of the stream: the held-back bytes, redacted.
    pub fn finish(&mut self) -> Vec<u8> {
        let r = Arc::clone(&self.redactor);
        let rest = &self.buf[self.start..];
        let out = if r.is_empty() {
            rest.to_vec()
        } else {
            let mut out = Vec::with_capacity(rest.len());
            let end = r.scan(rest, rest.len(), &mut out, &mut self.counts);
            out.extend_from_slice(&rest[end..]);
            out
        };
        wipe(&mut self.buf);
        self.start = 0;
        out
    }

    /// Replacements so far.
    pub fn counts(&self) -> RedactionCounts {
        self.redactor.counts(&self.counts)
    }
}

/// Redacts every text field of a tool result going back to the agent
/// (stdout, stderr, message, saved_output) and adds the count to
/// `result.redactions`. A second layer: the streams should already have gone
/// through a [`StreamRedactor`] before they were cut to head and tail, since a
/// cut through the middle of a value leaves a part no one-shot pass can
/// recognise.
pub fn redact_tool_result(
    r: &Redactor,
    result: &mut sysward_ipc::agent::ToolResult,
) -> RedactionCounts {
    let mut total = RedactionCounts::default();
    if r.is_empty() {
        return total;
    }
    for field in [&mut result.stdout, &mut result.stderr, &mut result.message] {
        let (text, c) = r.redact_str(field);
        if !c.is_empty() {
            *field = text;
            total.add(&c);
        }
    }
    if let Some(p) = &mut result.saved_output {
        let (text, c) = r.redact_str(p);
        *p = text;
        total.add(&c);
    }
    result.redactions = result
        .redactions
        .saturating_add(total.total().min(u64::from(u32::MAX)) as u32);
    total
}

/// Redacts a file change (its diff holds the old and new content, so a secret
/// written by `write_file` would otherwise reach the audit log and the model).
pub fn redact_file_change(
    r: &Redactor,
    change: &mut sysward_ipc::exec::FileChange,
) -> RedactionCounts {
    let mut total = RedactionCounts::default();
    if r.is_empty() {
        return total;
    }
    for field in [&mut change.path, &mut change.diff, &mut change.rollback] {
        let (text, c) = r.redact_str(field);
        *field = text;
        total.add(&c);
    }
    if let Some(b) = &mut change.backup {
        let (text, c) = r.redact_str(b);
        *b = text;
        total.add(&c);
    }
    total
}

/// Masks a credential for display (`sk-2f1...8a9`): the one rule of
/// [`sysward_store::config::mask_secret`].
pub fn mask_key(key: &str) -> String {
    sysward_store::config::mask_secret(key)
}

// ---- the forms of a value -------------------------------------------------

const B64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Below this many characters the unaligned base64 cores are not searched
/// (too short to be specific).
const MIN_CORE: usize = 8;

/// Base64 without padding.
pub fn base64_unpadded(data: &[u8], alphabet: &[u8; 64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for j in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * j)) & 63) as usize]);
        }
    }
    out
}

fn padded(mut unpadded: Vec<u8>) -> Vec<u8> {
    while unpadded.len() & 3 != 0 {
        unpadded.push(b'=');
    }
    unpadded
}

/// The base64 characters determined by `v` alone when it starts `k` bytes into
/// a 3-byte group (k = 0, 1, 2): what any base64 of data containing `v` at
/// such an offset must contain.
fn base64_core(v: &[u8], k: usize, alphabet: &[u8; 64]) -> Vec<u8> {
    let mut data = vec![0u8; k];
    data.extend_from_slice(v);
    data.extend_from_slice(&[0, 0, 0]);
    let enc = base64_unpadded(&data, alphabet);
    let first = (8 * k).div_ceil(6);
    let bits_end = 8 * (k + v.len());
    if bits_end < 6 {
        return Vec::new();
    }
    let last_excl = (bits_end - 6) / 6 + 1;
    if last_excl <= first || last_excl > enc.len() {
        return Vec::new();
    }
    let core = enc[first..last_excl].to_vec();
    wipe(&mut data);
    core
}

fn hex(v: &[u8], upper: bool, sep: Option<u8>) -> Vec<u8> {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(v.len() * 3);
    for (i, b) in v.iter().enumerate() {
        if i > 0 {
            if let Some(s) = sep {
                out.push(s);
            }
        }
        out.push(digits[usize::from(b >> 4)]);
        out.push(digits[usize::from(b & 15)]);
    }
    out
}

fn url_encoded_all(v: &[u8], upper: bool) -> Vec<u8> {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(v.len() * 3);
    for &b in v {
        out.extend_from_slice(&[
            b'%',
            digits[usize::from(b >> 4)],
            digits[usize::from(b & 15)],
        ]);
    }
    out
}

fn url_encoded(v: &[u8], upper: bool, plus_for_space: bool) -> Vec<u8> {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut out = Vec::with_capacity(v.len() * 3);
    for &b in v {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b);
        } else if b == b' ' && plus_for_space {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[
                b'%',
                digits[usize::from(b >> 4)],
                digits[usize::from(b & 15)],
            ]);
        }
    }
    out
}

/// Every form of `v` that is searched for.
fn forms(v: &[u8]) -> Vec<Vec<u8>> {
    if v.is_empty() {
        return Vec::new();
    }
    let mut f = vec![v.to_vec()];
    for alphabet in [B64_STD, B64_URL] {
        let unpadded = base64_unpadded(v, alphabet);
        f.push(padded(unpadded.clone()));
        f.push(unpadded);
        for k in 0..3 {
            let core = base64_core(v, k, alphabet);
            if core.len() >= MIN_CORE {
                f.push(core);
            }
        }
    }
    f.push(hex(v, false, None));
    f.push(hex(v, true, None));
    if v.len() > 1 {
        f.push(hex(v, false, Some(b' ')));
        f.push(hex(v, true, Some(b' ')));
    }
    for upper in [true, false] {
        f.push(url_encoded(v, upper, false));
        f.push(url_encoded(v, upper, true));
        // `%68%75%6e…`: every byte encoded, as some encoders and `xxd -p |
        // sed 's/../%&/g'` write it.
        f.push(url_encoded_all(v, upper));
    }
    // Line-wrapped dumps of a file holding just the value: `base64` (76
    // columns), PEM/openssl (64), `xxd -p` (60 hex digits), and xxd's default
    // two-byte groups for a value that fits on one of its lines.
    let std_padded = padded(base64_unpadded(v, B64_STD));
    for width in [76, 64] {
        if std_padded.len() > width {
            f.push(wrapped(&std_padded, width));
        }
    }
    let hex_lower = hex(v, false, None);
    if hex_lower.len() > 60 {
        f.push(wrapped(&hex_lower, 60));
    }
    if v.len() > 2 && v.len() <= 16 {
        let groups: Vec<&[u8]> = hex_lower.chunks(4).collect();
        f.push(groups.join(&b' '));
    }
    if let Ok(s) = std::str::from_utf8(v) {
        let mut json_forms = Vec::new();
        if let Ok(json) = serde_json::to_string(s) {
            json_forms.push(json.as_bytes()[1..json.len() - 1].to_vec());
        }
        if !s.is_ascii() {
            json_forms.push(json_ascii(s, false));
            json_forms.push(json_ascii(s, true));
        }
        for j in json_forms {
            // PHP and some others also escape `/`.
            if j.contains(&b'/') {
                f.push(String::from_utf8_lossy(&j).replace('/', "\\/").into_bytes());
            }
            f.push(j);
        }
    }
    f
}

/// `data` with a newline after every `width` bytes (not after the last).
fn wrapped(data: &[u8], width: usize) -> Vec<u8> {
    let lines: Vec<&[u8]> = data.chunks(width).collect();
    lines.join(&b'\n')
}

/// The JSON string body with every non-ASCII character as `\uXXXX` (lower
/// case, surrogate pairs), as Python's `json.dumps` writes it by default.
fn json_ascii(s: &str, upper: bool) -> Vec<u8> {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    if upper {
                        out.push_str(&format!("\\u{unit:04X}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
            c => out.push(c),
        }
    }
    out.into_bytes()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn r(entries: &[(&str, &str)]) -> Arc<Redactor> {
        Arc::new(Redactor::new(
            entries
                .iter()
                .map(|(n, v)| RedactEntry::secret(n, v.as_bytes()))
                .collect(),
        ))
    }

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(base64_unpadded(b"", B64_STD), b"");
        assert_eq!(padded(base64_unpadded(b"f", B64_STD)), b"Zg==");
        assert_eq!(padded(base64_unpadded(b"fo", B64_STD)), b"Zm8=");
        assert_eq!(padded(base64_unpadded(b"foo", B64_STD)), b"Zm9v");
        assert_eq!(padded(base64_unpadded(b"foobar", B64_STD)), b"Zm9vYmFy");
        assert_eq!(base64_unpadded(&[0xfb, 0xff], B64_URL), b"-_8");
        assert_eq!(base64_unpadded(&[0xfb, 0xff], B64_STD), b"+/8");
    }

    #[test]
    fn every_form_is_replaced() {
        let v = "hunter2-Pa ss/wörd";
        let red = r(&[("db", v)]);
        let b = v.as_bytes();
        let cases: Vec<Vec<u8>> = vec![
            b.to_vec(),
            padded(base64_unpadded(b, B64_STD)),
            base64_unpadded(b, B64_STD),
            padded(base64_unpadded(b, B64_URL)),
            base64_unpadded(b, B64_URL),
            hex(b, false, None),
            hex(b, true, None),
            hex(b, false, Some(b' ')),
            url_encoded(b, true, false),
            url_encoded(b, false, false),
            url_encoded(b, true, true),
        ];
        for c in cases {
            let text = [b"before ".as_slice(), &c, b" after"].concat();
            let (out, counts) = red.redact_bytes(&text);
            assert_eq!(
                out,
                b"before {{secret:db}} after",
                "form {:?}",
                String::from_utf8_lossy(&c)
            );
            assert_eq!(counts.total(), 1);
        }
    }

    #[test]
    fn value_inside_a_longer_base64_stream_is_found_at_any_alignment() {
        let v = b"correct horse battery staple";
        let red = r(&[("db", "correct horse battery staple")]);
        for pre in 0..6 {
            for post in 0..4 {
                let mut data = vec![b'x'; pre];
                data.extend_from_slice(v);
                data.extend(std::iter::repeat_n(b'y', post));
                let enc = padded(base64_unpadded(&data, B64_STD));
                let (out, counts) = red.redact_bytes(&enc);
                assert!(
                    counts.total() >= 1,
                    "pre {pre} post {post}: {}",
                    String::from_utf8_lossy(&enc)
                );
                let core = base64_core(v, 0, B64_STD);
                assert!(!out.windows(core.len()).any(|w| w == core.as_slice()));
            }
        }
    }

    #[test]
    fn wrapped_dumps_and_ascii_json_are_replaced() {
        let long = "k".repeat(10) + &"Zq9-".repeat(20);
        let red = r(&[("key", &long), ("short", "s3cret-value")]);
        let enc = padded(base64_unpadded(long.as_bytes(), B64_STD));
        for width in [76, 64] {
            let text = [b"x\n".as_slice(), &wrapped(&enc, width), b"\ny"].concat();
            assert_eq!(
                red.redact_bytes(&text).0,
                b"x\n{{secret:key}}\ny",
                "width {width}"
            );
        }
        let xxd_p = wrapped(&hex(long.as_bytes(), false, None), 60);
        assert_eq!(red.redact_bytes(&xxd_p).0, b"{{secret:key}}");
        let (t, _) = red.redact_str("00000000: 7333 6372 6574 2d76 616c 7565  {{x}}");
        assert_eq!(t, "00000000: {{secret:short}}  {{x}}");
        let red = r(&[("w", "wörd-\u{1F600}")]);
        assert_eq!(
            json_ascii("wörd-\u{1F600}", false),
            b"w\\u00f6rd-\\ud83d\\ude00"
        );
        assert_eq!(
            red.redact_str(r#"{"p": "w\u00f6rd-\ud83d\ude00"}"#).0,
            r#"{"p": "{{secret:w}}"}"#
        );
    }

    #[test]
    fn leftmost_longest_and_counts() {
        let red = r(&[("a", "abcd"), ("b", "abcdefgh")]);
        let (out, c) = red.redact_str("xxabcdefghyy abcd");
        assert_eq!(out, "xx{{secret:b}}yy {{secret:a}}");
        assert_eq!(c.by_label.get("a"), Some(&1));
        assert_eq!(c.by_label.get("b"), Some(&1));
        assert_eq!(c.total(), 2);
    }

    #[test]
    fn streaming_equals_one_shot_for_every_split() {
        let red = r(&[("db", "s3cr3t-value"), ("tok", "ZZtokenZZ")]);
        let text =
            b"a s3cr3t-value b czNjcjN0LXZhbHVl c 73336372337420 ZZtokenZZZZtokenZZ s3cr3t-valu";
        let (whole, whole_counts) = red.redact_bytes(text);
        for split in 0..=text.len() {
            let mut s = red.stream();
            let mut out = s.push(&text[..split]);
            out.extend(s.push(&text[split..]));
            out.extend(s.finish());
            assert_eq!(out, whole, "split at {split}");
            assert_eq!(s.counts(), whole_counts);
        }
        // one byte at a time
        let mut s = red.stream();
        let mut out = Vec::new();
        for b in text.iter() {
            out.extend(s.push(std::slice::from_ref(b)));
        }
        out.extend(s.finish());
        assert_eq!(out, whole);
    }

    #[test]
    fn byte_at_a_time_with_a_large_secret_stays_linear() {
        let key: String = (0..3000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let red = Arc::new(Redactor::new(vec![RedactEntry::secret(
            "key",
            key.as_bytes(),
        )]));
        assert!(red.max_len() > 8000, "spaced hex of 3000 bytes");
        let mut text = Vec::new();
        for i in 0..200 {
            text.extend_from_slice(format!("line {i} ").as_bytes());
            if i % 50 == 7 {
                text.extend_from_slice(key.as_bytes());
            }
        }
        text.extend(std::iter::repeat_n(b'z', 1 << 20));
        let t = std::time::Instant::now();
        let mut s = red.stream();
        let mut out = Vec::new();
        for b in &text {
            out.extend(s.push(std::slice::from_ref(b)));
        }
        out.extend(s.finish());
        assert_eq!(out, red.redact_bytes(&text).0);
        assert_eq!(s.counts().total(), 4);
        // Quadratic copying of the 9 KB carry would take many seconds here.
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn property_stream_equals_one_shot_and_no_value_survives() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..400 {
            // values over a tiny alphabet overlap and nest often
            let values: Vec<Vec<u8>> = (0..1 + rnd(3))
                .map(|_| (0..4 + rnd(6)).map(|_| b"ab"[rnd(2) as usize]).collect())
                .collect();
            let entries: Vec<(String, String)> = values
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("s{i}"), String::from_utf8(v.clone()).unwrap()))
                .collect();
            let refs: Vec<(&str, &str)> = entries
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let red = r(&refs);
            let mut text = Vec::new();
            for _ in 0..rnd(40) {
                match rnd(4) {
                    0 => text.extend_from_slice(&values[rnd(values.len() as u64) as usize]),
                    1 => text.extend(base64_unpadded(
                        &values[rnd(values.len() as u64) as usize],
                        B64_STD,
                    )),
                    _ => text.push(b"ab \n"[rnd(4) as usize]),
                }
            }
            let (whole, counts) = red.redact_bytes(&text);
            for v in &values {
                assert!(
                    !whole.windows(v.len()).any(|w| w == v.as_slice()),
                    "round {round}"
                );
            }
            let mut s = red.stream();
            let mut out = Vec::new();
            let mut pos = 0;
            while pos < text.len() {
                let n = (1 + rnd(7) as usize).min(text.len() - pos);
                out.extend(s.push(&text[pos..pos + n]));
                pos += n;
            }
            out.extend(s.finish());
            assert_eq!(out, whole, "round {round}");
            assert_eq!(s.counts(), counts);
        }
    }

    #[test]
    fn empty_redactor_passes_through() {
        let red = Arc::new(Redactor::default());
        let mut s = red.stream();
        assert_eq!(s.push(b"abc"), b"abc");
        assert_eq!(s.finish(), b"");
        assert_eq!(red.redact_str("x").0, "x");
    }

    #[test]
    fn json_values_are_redacted() {
        let red = r(&[("db", "pa\"ss\\word")]);
        let mut v = serde_json::json!({"out": "x pa\"ss\\word y", "n": [1, "pa\"ss\\word"]});
        let c = red.redact_json(&mut v);
        assert_eq!(c.total(), 2);
        assert_eq!(v["out"], "x {{secret:db}} y");
        assert_eq!(v["n"][1], "{{secret:db}}");
        // Keys too, at any depth; the values under a masked key are kept
        // and masked in turn; a record with nothing to mask is untouched.
        let mut v = serde_json::json!({
            "event": "tool",
            "env": {"pa\"ss\\word": "pa\"ss\\word", "HOME": "/root"},
            "stages_us": {"run": 800, "exec": 75},
        });
        let c = red.redact_json(&mut v);
        assert_eq!(c.total(), 2);
        assert_eq!(
            v,
            serde_json::json!({
                "event": "tool",
                "env": {"{{secret:db}}": "{{secret:db}}", "HOME": "/root"},
                "stages_us": {"run": 800, "exec": 75},
            })
        );
        let clean = serde_json::json!({"event": "tool", "request": "/bin/true", "n": [1, "x"]});
        let mut same = clean.clone();
        assert!(red.redact_json(&mut same).is_empty());
        assert_eq!(same, clean);
        // the JSON-escaped form, as a program printing JSON would show it
        let (t, _) = red.redact_str(r#"{"p":"pa\"ss\\word"}"#);
        assert_eq!(t, r#"{"p":"{{secret:db}}"}"#);
    }

    #[test]
    fn masked_replacement_and_mask_key() {
        let key = "sk-2f1aaaaaaaaaaaaaaaaaaaa8a9";
        let red = Redactor::new(vec![RedactEntry::with_replacement(
            "API_KEY",
            key.as_bytes(),
            &mask_key(key),
        )]);
        assert_eq!(
            red.redact_str(&format!("Authorization: Bearer {key}")).0,
            "Authorization: Bearer sk-2f1...8a9"
        );
        assert_eq!(mask_key("short"), "***");
    }

    #[test]
    fn tool_results_and_file_changes_are_redacted() {
        let red = r(&[("db", "s3cr3t-value")]);
        let mut res = sysward_ipc::agent::ToolResult::refused(
            "c1",
            sysward_ipc::agent::ToolStatus::Ok,
            "note s3cr3t-value",
        );
        res.stdout = "out s3cr3t-value".to_string();
        res.stderr = "err 73336372337420".to_string();
        res.redactions = 1;
        let c = redact_tool_result(&red, &mut res);
        assert_eq!(c.total(), 2);
        assert_eq!(res.redactions, 3);
        assert_eq!(res.stdout, "out {{secret:db}}");
        assert_eq!(res.message, "note {{secret:db}}");
        assert_eq!(res.stderr, "err 73336372337420", "not a whole hex form");
        let mut ch = sysward_ipc::exec::FileChange {
            path: "/etc/app/pw".to_string(),
            diff: "-old\n+s3cr3t-value\n".to_string(),
            backup: None,
            rollback: String::new(),
        };
        assert_eq!(redact_file_change(&red, &mut ch).total(), 1);
        assert_eq!(ch.diff, "-old\n+{{secret:db}}\n");
    }

    #[test]
    #[ignore = "benchmark: cargo test --release -- --ignored --nocapture bench_"]
    fn bench_redactor_throughput() {
        let names: Vec<(String, String)> = (0..20)
            .map(|i| (format!("s{i}"), format!("Secret-Value-{i}-xYz!@#{i}")))
            .collect();
        let many = Arc::new(Redactor::new(
            names
                .iter()
                .map(|(n, v)| RedactEntry::secret(n, v.as_bytes()))
                .collect(),
        ));
        let one = Arc::new(Redactor::new(vec![RedactEntry::secret(
            "db",
            b"Tr0ub4dor&3 horse",
        )]));
        let log_line: &[u8] = b"2026-11-29T15:00:00Z host nginx[1234]: GET /api/v1/items?id=42 200 1532 \"Mozilla/5.0\" 0a1b2c3d4e5f ZXhhbXBsZQ==\n";
        // xxd-like hex dump: every position starts a hex pair, the worst case
        // for the two-byte index (hex patterns of all secrets are candidates).
        let hex_line: &[u8] =
            b"00000010: 3031 3233 3435 3637 3839 6162 6364 6566  0123456789abcdef\n";
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..64 << 20)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let fill = |line: &[u8]| {
            let mut t = Vec::with_capacity(64 << 20);
            while t.len() < 64 << 20 {
                t.extend_from_slice(line);
            }
            t
        };
        for (what, text) in [
            ("log text", fill(log_line)),
            ("hex dump", fill(hex_line)),
            ("random bytes", random),
        ] {
            for (label, red) in [("20 secrets", &many), ("1 secret", &one)] {
                let t = std::time::Instant::now();
                let (out, _) = red.redact_bytes(&text);
                let one_shot = text.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
                assert!(!out.is_empty());
                let t = std::time::Instant::now();
                let mut s = red.stream();
                let mut n = 0;
                for chunk in text.chunks(64 << 10) {
                    n += s.push(chunk).len();
                }
                n += s.finish().len();
                let streamed = text.len() as f64 / t.elapsed().as_secs_f64() / 1e6;
                assert!(n > 0);
                println!(
                    "{what:>12}, {label:>10} ({:>3} patterns): one-shot {one_shot:>5.0} MB/s, stream (64 KiB chunks) {streamed:>5.0} MB/s",
                    red.pattern_count()
                );
            }
        }
    }
}
