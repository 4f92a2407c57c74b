//! The records a guest forwards (`forward-records`, or a step's `forward`): kept by the host for
//! the page, never handed to the guest, within what the guest itself could have held.

use crate::bindings::HttpError;

/// Records the host keeps for a page (`forward-records`, or a step's `forward`), and their bytes,
/// bounded by the records-per-page limit and the guest's memory limit: the host holds no more for
/// a guest than the guest could have held itself.
pub struct Forwarded {
    pub records: Vec<String>,
    bytes: usize,
    max_records: usize,
    max_bytes: usize,
    /// Where they are counted, for messages: "in this call", "for this page".
    scope: &'static str,
}

impl Forwarded {
    pub fn new(max_records: usize, max_bytes: usize, scope: &'static str) -> Self {
        Forwarded { records: Vec::new(), bytes: 0, max_records, max_bytes, scope }
    }

    /// How many more records may be kept.
    pub fn room(&self) -> usize {
        self.max_records.saturating_sub(self.records.len())
    }

    /// Why an answer of `count` records, more than [`Forwarded::room`], is refused (counted while
    /// the answer was split, before any was taken out): as [`Forwarded::keep`] says it.
    pub fn too_many(&self, count: usize) -> HttpError {
        let (limit, scope) = (self.max_records, self.scope);
        HttpError::InvalidRequest(format!(
            "forwarding {count} more records makes {} {scope}, past the limit of {limit} records per page",
            self.records.len() + count
        ))
    }

    /// Refused before anything is sent when nothing more could be kept.
    pub fn check_room(&self) -> Result<(), HttpError> {
        if self.records.len() >= self.max_records {
            return Err(HttpError::InvalidRequest(format!(
                "{} records were forwarded {} already, the limit of records per page",
                self.records.len(),
                self.scope
            )));
        }
        Ok(())
    }

    /// Keeps an answer's records after those kept before; how many, or why not (then none are).
    pub fn keep(&mut self, records: Vec<String>) -> Result<u32, HttpError> {
        let (count, bytes) = (records.len(), records.iter().map(String::len).sum::<usize>());
        if self.records.len() + count > self.max_records {
            return Err(self.too_many(count));
        }
        if self.bytes + bytes > self.max_bytes {
            return Err(HttpError::InvalidRequest(format!(
                "forwarding {bytes} more bytes of records makes {} {}, past the guest's memory limit of {} bytes",
                self.bytes + bytes,
                self.scope,
                self.max_bytes
            )));
        }
        self.bytes += bytes;
        self.records.extend(records);
        Ok(u32::try_from(count).expect("at most the records-per-page limit"))
    }
}
