//! A reference from a later stage of a chain ([`crate::Plan::Chain`]) to
//! an earlier stage's output or counter: `@N` and `@N:GROUP.NAME`.

use std::fmt;
use std::str::FromStr;

use crate::RequestError;

/// Stage `N`'s output (`@N`), or the value of its user counter
/// `GROUP.NAME` (`@N:GROUP.NAME`, 0 if it never counted).
///
/// # Grammar
///
/// Byte by byte, the whole string and nothing else:
///
/// 1. `@`;
/// 2. the stage: ASCII digits `0`-`9`, at least one, no sign, no leading
///    `0` unless the number is `0` itself, at most `usize::MAX`;
/// 3. then either the end (`@N`, the output), or `:` followed by
///    4. the group: one or more bytes, none of them `.`;
///    5. `.`, the first one after the `:`;
///    6. the name: one or more bytes, any.
///
/// So `@0`, `@12` and `@3:KMEANS.MOVED` are references; `@`, `@+1`, `@-1`,
/// `@01`, `@1:`, `@1:G`, `@1:G.`, `@1:.N` and a stage past `usize::MAX`
/// are not. A reference prints as it parses: `Display` writes exactly the
/// text `FromStr` read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StageRef {
    stage: usize,
    counter: Option<(String, String)>,
}

impl StageRef {
    /// Stage `stage`'s output, `@stage`.
    pub fn output(stage: usize) -> Self {
        StageRef {
            stage,
            counter: None,
        }
    }

    /// Stage `stage`'s user counter `group.name`; refused when `group` is
    /// empty or holds a `.`, or `name` is empty.
    pub fn counter(stage: usize, group: &str, name: &str) -> Result<Self, RequestError> {
        let text = format!("@{stage}:{group}.{name}");
        if group.is_empty() || group.contains('.') || name.is_empty() {
            return Err(bad(&text, "the counter is GROUP.NAME, a group without `.`"));
        }
        Ok(StageRef {
            stage,
            counter: Some((group.to_owned(), name.to_owned())),
        })
    }

    /// The stage referred to.
    pub fn stage(&self) -> usize {
        self.stage
    }

    /// The counter's key as a job report keys its user counters
    /// (`GROUP.NAME`); `None` for a reference to the output.
    pub fn counter_key(&self) -> Option<String> {
        self.counter.as_ref().map(|(g, n)| format!("{g}.{n}"))
    }
}

fn bad(text: &str, why: &str) -> RequestError {
    RequestError::StageRef {
        text: text.to_owned(),
        why: why.to_owned(),
    }
}

/// The stage number of `digits` (grammar step 2).
fn stage(text: &str, digits: &str) -> Result<usize, RequestError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(text, "the stage is one or more digits 0-9"));
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(bad(text, "the stage has no leading 0"));
    }
    digits
        .parse()
        .map_err(|_| bad(text, "the stage is too large"))
}

impl FromStr for StageRef {
    type Err = RequestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix('@')
            .ok_or_else(|| bad(s, "a stage reference starts with @"))?;
        let Some((digits, counter)) = rest.split_once(':') else {
            return Ok(StageRef::output(stage(s, rest)?));
        };
        let n = stage(s, digits)?;
        let (group, name) = counter
            .split_once('.')
            .ok_or_else(|| bad(s, "the counter is GROUP.NAME"))?;
        StageRef::counter(n, group, name).map_err(|_| bad(s, "the counter is GROUP.NAME"))
    }
}

impl fmt::Display for StageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.stage)?;
        match &self.counter {
            Some((group, name)) => write!(f, ":{group}.{name}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn references_parse_and_print_back() {
        for text in [
            "@0",
            "@7",
            "@12",
            "@3:KMEANS.MOVED",
            "@0:G.N.M",
            "@1:a b.c,d",
        ] {
            let r: StageRef = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
        }
        let r: StageRef = "@4:PAGERANK.DANGLING".parse().unwrap();
        assert_eq!(r.stage(), 4);
        assert_eq!(r.counter_key().as_deref(), Some("PAGERANK.DANGLING"));
        assert_eq!("@4".parse::<StageRef>().unwrap(), StageRef::output(4));
        assert_eq!(StageRef::output(4).counter_key(), None);
    }

    #[test]
    fn other_forms_are_refused() {
        let too_big = format!("@{}0", usize::MAX);
        let refused = [
            "", "1", "@", "@+1", "@-1", "@ 1", "@1 ", "@01", "@00", "@1a", "@1:", "@1:G", "@1:G.",
            "@1:.N", "@:G.N", "@+1:G.N", "@1,@2", "x@1",
        ];
        for text in refused.iter().copied().chain([too_big.as_str()]) {
            let e = text.parse::<StageRef>().unwrap_err();
            assert!(matches!(e, RequestError::StageRef { .. }), "{text}: {e}");
        }
        let e = "@+1".parse::<StageRef>().unwrap_err().to_string();
        assert_eq!(
            e,
            "@+1 is not a stage reference: the stage is one or more digits 0-9"
        );
    }

    #[test]
    fn a_counter_is_made_only_of_a_group_and_a_name() {
        assert!(StageRef::counter(1, "G", "N").is_ok());
        assert!(StageRef::counter(1, "", "N").is_err());
        assert!(StageRef::counter(1, "G.H", "N").is_err());
        assert!(StageRef::counter(1, "G", "").is_err());
    }

    proptest! {
        #[test]
        fn every_reference_round_trips(
            stage in any::<usize>(),
            counter in proptest::option::of(("[^.]{1,8}", ".{1,8}")),
        ) {
            let r = match &counter {
                None => StageRef::output(stage),
                Some((g, n)) => StageRef::counter(stage, g, n).unwrap(),
            };
            prop_assert_eq!(r.to_string().parse::<StageRef>().unwrap(), r);
        }

        #[test]
        fn what_parses_prints_as_it_was(text in "@[0-9+-]{0,4}(:[A-Z.]{0,4})?") {
            if let Ok(r) = text.parse::<StageRef>() {
                prop_assert_eq!(r.to_string(), text);
            }
        }
    }
}
