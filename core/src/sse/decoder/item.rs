//! What the decoder hands out: [`Item`] (owned, sharing the input's memory) and
//! [`ItemRef`] (borrowed from the decoder until the next pull), with their events.
//!
//! Two families, one shape: `Item`/`Event`/[`Utf8Bytes`] own (a reference count on the
//! pushed chunks, no copy) and can be kept; `ItemRef`/`EventRef`/[`Utf8Ref`] borrow and
//! touch no reference count, for a loop that is done with each item before the next
//! pull. `to_item`/`to_event`/`to_bytes` turn a borrowed one into the owned one.

use std::time::Duration;

use crate::{Utf8Bytes, Utf8Ref};

/// One dispatched server-sent event (WHATWG §9.2.6 "dispatch the event").
///
/// `data` is the event's data buffer with the final LF removed; `event_type` is the
/// `event` field or `message`; `id` is the *last event ID string* in force when the event
/// was dispatched (it persists across events until an `id` field changes it).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Event {
    pub(super) data: Utf8Bytes,
    // Empty means the default type, `message` (SSE-PARSE-17).
    pub(super) event_type: Utf8Bytes,
    pub(super) id: Utf8Bytes,
}

impl Event {
    /// Builds an event as a decoder would dispatch it: an empty `event_type` means `message`.
    pub fn new(
        data: impl Into<Utf8Bytes>,
        event_type: impl Into<Utf8Bytes>,
        id: impl Into<Utf8Bytes>,
    ) -> Self {
        Self {
            data: data.into(),
            event_type: event_type.into(),
            id: id.into(),
        }
    }

    /// The event data: the `data` lines joined with LF (SSE-PARSE-16).
    #[inline]
    pub fn data(&self) -> &str {
        self.data.as_str()
    }

    /// The event data as reference-counted bytes (a slice of the input where possible).
    #[inline]
    pub fn data_bytes(&self) -> &Utf8Bytes {
        &self.data
    }

    /// Takes the event data without copying it.
    #[inline]
    pub fn into_data(self) -> Utf8Bytes {
        self.data
    }

    /// The event type: the last `event` field of the event, or `message` (SSE-PARSE-17).
    #[inline]
    pub fn event_type(&self) -> &str {
        event_type_or_message(&self.event_type)
    }

    /// The last event ID string at dispatch time; empty if no id is in force (SSE-PARSE-14).
    #[inline]
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The last event ID string as reference-counted bytes.
    #[inline]
    pub fn id_bytes(&self) -> &Utf8Bytes {
        &self.id
    }
}

/// SSE-PARSE-17: an empty event-type buffer means `message`.
fn event_type_or_message(event_type: &str) -> &str {
    if event_type.is_empty() {
        "message"
    } else {
        event_type
    }
}

/// What [`Decoder::poll_item`](super::Decoder::poll_item) yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A dispatched event (a block of lines that ended with a blank line and had `data`).
    Event(Event),
    /// A comment line (`:` first), without the colon: the keep-alive signal (SSE-PARSE-7).
    Comment(Utf8Bytes),
    /// A valid `retry` field: the new reconnection time (SSE-PARSE-13). Edge-triggered;
    /// [`Decoder::retry`](super::Decoder::retry) gives the level.
    Retry(Duration),
}

/// A dispatched event borrowed from the decoder: see [`Decoder::poll_item_ref`](super::Decoder::poll_item_ref).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    pub(super) data: Utf8Ref<'a>,
    pub(super) event_type: Utf8Ref<'a>,
    pub(super) id: Utf8Ref<'a>,
}

impl<'a> EventRef<'a> {
    /// The event data: the `data` lines joined with LF (SSE-PARSE-16).
    #[inline]
    pub fn data(&self) -> &'a str {
        self.data.as_str()
    }

    /// The event data as a borrowed view that can be turned into owned bytes without a copy.
    #[inline]
    pub fn data_ref(&self) -> Utf8Ref<'a> {
        self.data
    }

    /// The event type: the last `event` field of the event, or `message` (SSE-PARSE-17).
    #[inline]
    pub fn event_type(&self) -> &'a str {
        event_type_or_message(self.event_type.as_str())
    }

    /// The last event ID string at dispatch time; empty if no id is in force (SSE-PARSE-14).
    #[inline]
    pub fn id(&self) -> &'a str {
        self.id.as_str()
    }

    /// The owned event, sharing the decoder's bytes (no copy).
    pub fn to_event(&self) -> Event {
        Event {
            data: self.data.to_bytes(),
            event_type: self.event_type.to_bytes(),
            id: self.id.to_bytes(),
        }
    }
}

/// What [`Decoder::poll_item_ref`](super::Decoder::poll_item_ref) yields: an [`Item`] borrowed from the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemRef<'a> {
    /// A dispatched event.
    Event(EventRef<'a>),
    /// A comment line, without the colon (SSE-PARSE-7).
    Comment(Utf8Ref<'a>),
    /// A valid `retry` field (SSE-PARSE-13).
    Retry(Duration),
}

impl ItemRef<'_> {
    /// The owned item, sharing the decoder's bytes (no copy).
    pub fn to_item(&self) -> Item {
        match self {
            Self::Event(event) => Item::Event(event.to_event()),
            Self::Comment(text) => Item::Comment(text.to_bytes()),
            Self::Retry(retry) => Item::Retry(*retry),
        }
    }
}
