//! Why a core component refuses its configuration: one typed error for the
//! constructors of schedulers, meters and the CTR, so a caller branches on
//! the kind of fault ([`Fault`]) and a user reads one sentence naming the
//! component and the parameter.

use std::fmt;

/// A refused configuration: which component, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// "wfq", "htb", "srTCM", "CTR", ...
    pub component: &'static str,
    pub fault: Fault,
}

/// What is wrong with a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// This parameter must be above zero ("link rate", "class 3 rate").
    Zero(String),
    /// This item is given twice ("class 3", "queue 7").
    Duplicate(String),
    /// A parameter outside the values the component takes.
    Range {
        param: String,
        value: String,
        allowed: String,
    },
    /// Parts that contradict each other (a class its own parent, PIR
    /// below CIR): the sentence says which.
    Conflict(String),
    /// Something the component needs is absent (no classes, an unknown
    /// parent): the sentence says what.
    Missing(String),
}

impl ConfigError {
    pub fn zero(component: &'static str, param: impl Into<String>) -> Self {
        ConfigError {
            component,
            fault: Fault::Zero(param.into()),
        }
    }
    pub fn duplicate(component: &'static str, what: impl Into<String>) -> Self {
        ConfigError {
            component,
            fault: Fault::Duplicate(what.into()),
        }
    }
    pub fn range(
        component: &'static str,
        param: impl Into<String>,
        value: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        ConfigError {
            component,
            fault: Fault::Range {
                param: param.into(),
                value: value.to_string(),
                allowed: allowed.into(),
            },
        }
    }
    pub fn conflict(component: &'static str, why: impl Into<String>) -> Self {
        ConfigError {
            component,
            fault: Fault::Conflict(why.into()),
        }
    }
    pub fn missing(component: &'static str, what: impl Into<String>) -> Self {
        ConfigError {
            component,
            fault: Fault::Missing(what.into()),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.component)?;
        match &self.fault {
            Fault::Zero(p) => write!(f, "{p} must be > 0"),
            Fault::Duplicate(w) => write!(f, "{w} is given twice"),
            Fault::Range {
                param,
                value,
                allowed,
            } => write!(f, "{param} = {value} is not {allowed}"),
            Fault::Conflict(s) | Fault::Missing(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Callers that still speak in strings (the scenario loader's messages)
/// take the sentence with `?`.
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_reads_as_one_sentence_naming_the_component() {
        assert_eq!(
            ConfigError::zero("wfq", "link rate").to_string(),
            "wfq: link rate must be > 0"
        );
        assert_eq!(
            ConfigError::duplicate("htb", "class 3").to_string(),
            "htb: class 3 is given twice"
        );
        assert_eq!(
            ConfigError::range("red", "max_p", 1.5, "in (0, 1]").to_string(),
            "red: max_p = 1.5 is not in (0, 1]"
        );
        let e: String = ConfigError::conflict("trTCM", "PIR below CIR").into();
        assert_eq!(e, "trTCM: PIR below CIR");
        assert!(matches!(
            ConfigError::missing("htb", "no classes").fault,
            Fault::Missing(_)
        ));
    }
}
