//! `subscriptions/listen` (MODERN-13): what a listening client asked to hear, what the
//! server can tell it, and the notifications an application's change becomes.
//!
//! The 2026-07-28 revision has no GET stream and no `resources/subscribe`: a client that
//! wants to learn of changes sends `subscriptions/listen` with a filter, and the
//! response stream of that request carries, first, an acknowledgement naming the part
//! of the filter the server honours, then each matching notification tagged with the
//! subscription's id (the listen request's id, as the client wrote it), and at last,
//! when the server ends it gracefully, the listen's result.

use serde_json::{Map, Value, json};

use super::CallError;
use super::modern::SUBSCRIPTION_ID;
use crate::jsonrpc::RequestId;

/// The method of the acknowledgement a listen stream starts with.
pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// A change the application announces to the clients listening for it
/// ([`Dispatcher::changed`](super::Dispatcher::changed)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The tool list changed (`notifications/tools/list_changed`).
    Tools,
    /// The prompt list changed (`notifications/prompts/list_changed`).
    Prompts,
    /// The resource list changed (`notifications/resources/list_changed`).
    Resources,
    /// This resource changed (`notifications/resources/updated`).
    Resource(String),
}

impl Change {
    /// The notification's method.
    pub const fn method(&self) -> &'static str {
        match self {
            Self::Tools => "notifications/tools/list_changed",
            Self::Prompts => "notifications/prompts/list_changed",
            Self::Resources => "notifications/resources/list_changed",
            Self::Resource(_) => "notifications/resources/updated",
        }
    }

    /// The change a server's notification tells (a stdio server's, say): `method` one
    /// of the four, `params.uri` for a resource; `None` for anything else.
    pub fn of_notification(method: &str, params: Option<&Value>) -> Option<Self> {
        match method {
            "notifications/tools/list_changed" => Some(Self::Tools),
            "notifications/prompts/list_changed" => Some(Self::Prompts),
            "notifications/resources/list_changed" => Some(Self::Resources),
            "notifications/resources/updated" => params?
                .get("uri")?
                .as_str()
                .map(|uri| Self::Resource(uri.to_owned())),
            _ => None,
        }
    }

    /// The change as the nodes of a cluster tell it each other
    /// ([`Server::announce`](crate::server::Server::announce)).
    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            Self::Tools => b"tools".to_vec(),
            Self::Prompts => b"prompts".to_vec(),
            Self::Resources => b"resources".to_vec(),
            Self::Resource(uri) => format!("resource {uri}").into_bytes(),
        }
    }

    /// The change another node announced; `None` for anything else.
    pub(super) fn decode(payload: &[u8]) -> Option<Self> {
        match std::str::from_utf8(payload).ok()? {
            "tools" => Some(Self::Tools),
            "prompts" => Some(Self::Prompts),
            "resources" => Some(Self::Resources),
            text => text
                .strip_prefix("resource ")
                .map(|uri| Self::Resource(uri.to_owned())),
        }
    }

    /// The notification's params for the subscription `id`.
    pub(super) fn params(&self, id: &Value) -> Value {
        let mut params = json!({"_meta": {SUBSCRIPTION_ID: id}});
        if let Self::Resource(uri) = self {
            params["uri"] = Value::from(uri.as_str());
        }
        params
    }
}

/// The part of a listen's filter the server honours.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    /// The resources whose updates it wants (`resourceSubscriptions`).
    uris: Vec<String>,
}

impl Filter {
    /// The honoured part of `params.notifications` of a listen request: what it asks
    /// for that `capabilities` (the server's) offers (`listChanged` of tools, prompts
    /// and resources; `resources.subscribe` for updates). At most `max_uris` resources.
    ///
    /// # Errors
    /// -32602 when the filter is missing or not of its shape, or names too many
    /// resources.
    pub(super) fn honoured(
        params: Option<&Value>,
        capabilities: &Value,
        max_uris: usize,
    ) -> Result<Self, CallError> {
        let Some(asked) = params
            .and_then(|p| p.get("notifications"))
            .and_then(Value::as_object)
        else {
            return Err(CallError::invalid_params(
                "subscriptions/listen needs params.notifications, an object",
            ));
        };
        let offers = |kind: &str, feature: &str| {
            capabilities
                .get(kind)
                .and_then(|k| k.get(feature))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let wants = |key: &str| -> Result<bool, CallError> {
            match asked.get(key) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(CallError::invalid_params(format!(
                    "notifications.{key} must be a boolean"
                ))),
            }
        };
        let mut filter = Self {
            tools: wants("toolsListChanged")? && offers("tools", "listChanged"),
            prompts: wants("promptsListChanged")? && offers("prompts", "listChanged"),
            resources: wants("resourcesListChanged")? && offers("resources", "listChanged"),
            uris: Vec::new(),
        };
        match asked.get("resourceSubscriptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(uris)) => {
                if uris.len() > max_uris {
                    return Err(CallError::invalid_params(format!(
                        "at most {max_uris} resourceSubscriptions per listen"
                    )));
                }
                let mut all = Vec::with_capacity(uris.len());
                for uri in uris {
                    let uri = uri.as_str().ok_or_else(|| {
                        CallError::invalid_params("resourceSubscriptions holds URIs (strings)")
                    })?;
                    all.push(uri.to_owned());
                }
                if offers("resources", "subscribe") {
                    filter.uris = all;
                }
            }
            Some(_) => {
                return Err(CallError::invalid_params(
                    "notifications.resourceSubscriptions must be an array",
                ));
            }
        }
        Ok(filter)
    }

    /// Whether `change` is one it asked for.
    pub(super) fn wants(&self, change: &Change) -> bool {
        match change {
            Change::Tools => self.tools,
            Change::Prompts => self.prompts,
            Change::Resources => self.resources,
            Change::Resource(uri) => self.uris.iter().any(|u| u == uri),
        }
    }

    /// The filter as the acknowledgement echoes it: only what is honoured.
    pub(super) fn to_json(&self) -> Value {
        let mut echo = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                echo.insert(key.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            echo.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(echo)
    }
}

/// The subscription id of a listen: its request id, of the same JSON type.
pub(super) fn subscription_id(id: &RequestId) -> Value {
    match (id.as_int(), id.as_str()) {
        (Some(n), _) => Value::from(n),
        (None, Some(s)) => Value::from(s),
        (None, None) => Value::Null,
    }
}

/// The acknowledgement's params.
pub(super) fn acknowledgement(id: &Value, filter: &Filter) -> Value {
    json!({"_meta": {SUBSCRIPTION_ID: id}, "notifications": filter.to_json()})
}

/// The result that ends a listen gracefully.
pub(super) fn ended(id: &Value) -> Value {
    json!({"_meta": {SUBSCRIPTION_ID: id}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Value {
        json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}})
    }

    #[test]
    fn modern_13_the_filter_honoured_is_what_was_asked_and_is_offered() {
        let params = json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["file:///a"]}});
        let f = Filter::honoured(Some(&params), &caps(), 8).unwrap();
        assert!(f.wants(&Change::Tools));
        assert!(
            !f.wants(&Change::Prompts),
            "prompts.listChanged is not offered"
        );
        assert!(f.wants(&Change::Resource("file:///a".into())));
        assert!(!f.wants(&Change::Resource("file:///b".into())));
        assert_eq!(
            f.to_json(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        let none = Filter::honoured(Some(&json!({"notifications": {}})), &caps(), 8).unwrap();
        assert_eq!(none.to_json(), json!({}));
    }

    #[test]
    fn a_filter_of_the_wrong_shape_or_size_is_invalid_params() {
        for params in [
            json!({}),
            json!({"notifications": true}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": "file:///a"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"resourceSubscriptions": ["a", "b", "c"]}}),
        ] {
            let e = Filter::honoured(Some(&params), &caps(), 2).unwrap_err();
            assert_eq!(
                e.code,
                crate::jsonrpc::ErrorCode::INVALID_PARAMS,
                "{params}"
            );
        }
        assert!(Filter::honoured(None, &caps(), 2).is_err());
    }

    #[test]
    fn modern_13_notifications_carry_the_subscription_id_as_its_type() {
        let id = subscription_id(&RequestId::string("listen:0"));
        assert_eq!(id, json!("listen:0"));
        assert_eq!(subscription_id(&RequestId::int(7)), json!(7));
        assert_eq!(
            Change::Resource("u".into()).params(&id),
            json!({"uri": "u", "_meta": {SUBSCRIPTION_ID: "listen:0"}})
        );
        assert_eq!(
            Change::Tools.params(&id),
            json!({"_meta": {SUBSCRIPTION_ID: "listen:0"}})
        );
    }
}
