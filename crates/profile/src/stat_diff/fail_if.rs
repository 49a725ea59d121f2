//! `diff --fail-if EXPR`: a condition on a set comparison that fails a CI build, parsed
//! once into a typed expression.
//!
//! Grammar (spaces anywhere between the parts):
//!
//! ```text
//! EXPR      := SUBJECT '>' THRESHOLD
//! SUBJECT   := 'self(' FUNCTION ')' | 'incl(' FUNCTION ')' | 'any' | 'total_cpu'
//! THRESHOLD := ['+'] NUMBER 'pp'      (self, incl, any: percentage points of share)
//!            | ['+'] NUMBER '%'       (self, incl, any: percent of BEFORE's rate, the
//!                                      function's samples per second; total_cpu: percent
//!                                      of BEFORE's samples per second)
//! ```
//!
//! A condition holds when the change is above the threshold and the verdict of that same
//! quantity is `regressed` (significant after Holm's correction: a threshold in points is
//! judged on the share's test, one in percent on the rate's); with one window on each side
//! there is no verdict and the change alone decides (the output says so).
//!
//! Why both: a share falls when anything else grows, so a function made heavier on a
//! host whose load moves shows in its rate long before its share passes a few points.

use super::functions::{Delta, Direction, FunctionChange, SetDiff};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A function's self time.
    SelfOf(String),
    /// A function's inclusive time.
    InclusiveOf(String),
    /// Any function's self time.
    Any,
    /// The process's samples per second.
    TotalCpu,
}

/// What the threshold measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Percentage points of share (functions only).
    SharePoints,
    /// Percent of BEFORE's samples per second.
    RatePercent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FailIf {
    pub subject: Subject,
    pub measure: Measure,
    /// Percentage points or percent, as `measure` says.
    pub threshold: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FailIfError {
    #[error("--fail-if '{text}': {why}; the forms are self(FUNC) > +2pp, incl(FUNC) > +3pp, any > +3pp (points of share), self(FUNC) > +20% (percent of its samples per second), total_cpu > +5%")]
    Syntax { text: String, why: String },
    #[error("--fail-if '{text}': no function named '{name}' in BEFORE or AFTER (names are matched whole, as `top` prints them)")]
    UnknownFunction { text: String, name: String },
    #[error("--fail-if '{text}': a threshold in % needs the windows' lengths, which .folded files do not have; compare captures from the store, or give the threshold in pp")]
    NoRates { text: String },
}

impl fmt::Display for FailIf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.measure {
            Measure::SharePoints => "pp",
            Measure::RatePercent => "%",
        };
        let t = self.threshold;
        match &self.subject {
            Subject::SelfOf(n) => write!(f, "self({n}) > +{t}{unit}"),
            Subject::InclusiveOf(n) => write!(f, "incl({n}) > +{t}{unit}"),
            Subject::Any => write!(f, "any > +{t}{unit}"),
            Subject::TotalCpu => write!(f, "total_cpu > +{t}{unit}"),
        }
    }
}

impl FailIf {
    pub fn parse(text: &str) -> Result<FailIf, FailIfError> {
        let err = |why: &str| FailIfError::Syntax {
            text: text.to_string(),
            why: why.to_string(),
        };
        // The last `>`: function names hold their own (`<T as Trait>::f`), thresholds none.
        let (lhs, rhs) = text
            .rsplit_once('>')
            .ok_or_else(|| err("no `>` between the subject and the threshold"))?;
        let lhs = lhs.trim();
        let call = |prefix: &str| -> Result<Option<String>, FailIfError> {
            let Some(rest) = lhs.strip_prefix(prefix) else {
                return Ok(None);
            };
            let name = rest
                .trim_start()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .map(str::trim)
                .ok_or_else(|| err(&format!("{prefix} takes a function name in parentheses")))?;
            if name.is_empty() {
                return Err(err(&format!("{prefix}() names no function")));
            }
            Ok(Some(name.to_string()))
        };
        let subject = if lhs == "any" {
            Subject::Any
        } else if lhs == "total_cpu" {
            Subject::TotalCpu
        } else if let Some(name) = call("self")? {
            Subject::SelfOf(name)
        } else if let Some(name) = call("incl")? {
            Subject::InclusiveOf(name)
        } else {
            return Err(err(&format!("unknown subject '{lhs}'")));
        };
        let rhs = rhs.trim();
        let (number, measure) = if let Some(n) = rhs.strip_suffix("pp") {
            (n, Measure::SharePoints)
        } else if let Some(n) = rhs.strip_suffix('%') {
            (n, Measure::RatePercent)
        } else {
            return Err(err(
                "the threshold needs a unit: pp (points of share) or % (of the rate)",
            ));
        };
        if subject == Subject::TotalCpu && measure == Measure::SharePoints {
            return Err(err("total_cpu is measured in %, not pp"));
        }
        let number = number.trim();
        if number.starts_with('-') {
            return Err(err("the threshold is an increase: give it as +N"));
        }
        let threshold: f64 = number
            .trim_start_matches('+')
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| err(&format!("'{number}' is not a number")))?;
        Ok(FailIf {
            subject,
            measure,
            threshold,
        })
    }

    /// Why the condition holds for `diff`, or None when it does not.
    pub fn check(&self, diff: &SetDiff) -> Result<Option<String>, FailIfError> {
        let text = self.to_string();
        let no_rates = || FailIfError::NoRates { text: text.clone() };
        let unknown = |name: &str| FailIfError::UnknownFunction {
            text: text.clone(),
            name: name.to_string(),
        };
        let function = |name: &str| diff.function(name).ok_or_else(|| unknown(name));
        // The function's quantity this condition is about; None: no rates (folded files).
        let pick = |f: &FunctionChange, inclusive: bool| -> Option<Delta> {
            match (self.measure, inclusive) {
                (Measure::SharePoints, false) => Some(f.self_share),
                (Measure::SharePoints, true) => Some(f.incl_share),
                (Measure::RatePercent, false) => f.self_rate,
                (Measure::RatePercent, true) => f.incl_rate,
            }
        };
        let hit = |label: &str, d: &Delta| self.trips(d).map(|size| format!("{label} {size}"));
        Ok(match &self.subject {
            Subject::SelfOf(name) | Subject::InclusiveOf(name) => {
                let inclusive = matches!(self.subject, Subject::InclusiveOf(_));
                let d = pick(function(name)?, inclusive).ok_or_else(no_rates)?;
                let label = if inclusive { "incl" } else { "self" };
                hit(&format!("{label}({name})"), &d).map(|h| format!("{text}: {h}"))
            }
            Subject::Any => {
                let mut hits = Vec::new();
                for f in &diff.functions {
                    let d = pick(f, false).ok_or_else(no_rates)?;
                    hits.extend(hit(&f.name, &d));
                }
                (!hits.is_empty()).then(|| format!("{text}: {}", hits.join("; ")))
            }
            Subject::TotalCpu => {
                let d = diff.total_rate.ok_or_else(no_rates)?;
                hit("samples per second", &d).map(|h| format!("{text}: {h}"))
            }
        })
    }

    /// The change as the threshold measures it ("+2.31pp, regressed") when it trips the
    /// condition: above the threshold, upward, and regressed (or no noise known).
    fn trips(&self, d: &Delta) -> Option<String> {
        let size = match self.measure {
            Measure::SharePoints => d.change,
            Measure::RatePercent if d.before > 0.0 => 100.0 * d.change / d.before,
            // From nothing: any growth is past every percentage.
            Measure::RatePercent if d.change > 0.0 => f64::INFINITY,
            Measure::RatePercent => 0.0,
        };
        let judged = matches!(d.verdict, Direction::Regressed | Direction::NoiseUnknown);
        if !(size > self.threshold && judged && d.change > 0.0) {
            return None;
        }
        let said = match d.verdict {
            Direction::NoiseUnknown => " (no noise known: one window a side)",
            _ => ", regressed",
        };
        Some(match self.measure {
            Measure::SharePoints => format!("{size:+.2}pp{said}"),
            Measure::RatePercent if size.is_finite() => format!("{size:+.1}%{said}"),
            Measure::RatePercent => format!("from none{said}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::functions::{compare_sets, WindowCounts};
    use super::*;
    use crate::folded::Folded;

    #[test]
    fn parses_the_four_forms_and_rejects_the_rest() {
        let p = |t: &str| FailIf::parse(t);
        assert_eq!(
            p("self(hash_chain) > +2pp").unwrap(),
            FailIf {
                subject: Subject::SelfOf("hash_chain".into()),
                measure: Measure::SharePoints,
                threshold: 2.0
            }
        );
        assert_eq!(
            p(" incl( a::b<T> ) >3pp").unwrap().subject,
            Subject::InclusiveOf("a::b<T>".into())
        );
        assert_eq!(p("any > +3pp").unwrap().subject, Subject::Any);
        assert_eq!(
            p("self(hash_chain) > +20%").unwrap().measure,
            Measure::RatePercent
        );
        assert_eq!(
            p("total_cpu > +5%").unwrap(),
            FailIf {
                subject: Subject::TotalCpu,
                measure: Measure::RatePercent,
                threshold: 5.0
            }
        );
        for (bad, says) in [
            ("any >= 3pp", "not a number"),
            ("any > 3", "needs a unit"),
            ("total_cpu > 3pp", "measured in %"),
            ("self() > 2pp", "names no function"),
            ("self x > 2pp", "parentheses"),
            ("all > 2pp", "unknown subject"),
            ("any 2pp", "no `>`"),
            ("any > -2pp", "an increase"),
        ] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    fn window(hot: u64) -> WindowCounts {
        let folded = Folded::from_folded_text(&format!("t;main;hot {hot}\nt;main;cold 500\n"));
        WindowCounts::of(&folded, Some(1.0))
    }

    #[test]
    fn a_condition_holds_on_a_significant_change_over_its_threshold() {
        let before: Vec<_> = [100, 104, 98, 102, 96].map(window).to_vec();
        let after: Vec<_> = [200, 204, 198, 202, 196].map(window).to_vec();
        let d = compare_sets(&before, &after, 0.95);
        let holds = |t: &str| FailIf::parse(t).unwrap().check(&d).unwrap();
        assert!(holds("self(hot) > +2pp").unwrap().contains("regressed"));
        assert!(holds("self(hot) > +20pp").is_none());
        assert!(holds("any > +3pp").unwrap().contains("hot"));
        assert!(holds("total_cpu > +5%").is_some());
        assert!(holds("self(cold) > +0pp").is_none());
        assert!(FailIf::parse("self(nope) > +1pp")
            .unwrap()
            .check(&d)
            .is_err());
        // The same set on both sides trips nothing.
        let same = compare_sets(&before, &before, 0.95);
        assert!(FailIf::parse("any > +0pp")
            .unwrap()
            .check(&same)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_rate_threshold_trips_on_a_function_that_grew_while_its_share_did_not() {
        // Everything ran 30% more: hot's share stays, its samples per second do not.
        let scaled = |hot: u64, cold: u64| {
            let text = format!("t;main;hot {hot}\nt;main;cold {cold}\n");
            WindowCounts::of(&Folded::from_folded_text(&text), Some(1.0))
        };
        let before: Vec<_> = [(100, 500), (104, 520), (98, 490), (102, 510), (96, 480)]
            .map(|(h, c)| scaled(h, c))
            .to_vec();
        let after: Vec<_> = [(130, 650), (135, 676), (127, 637), (133, 663), (125, 624)]
            .map(|(h, c)| scaled(h, c))
            .to_vec();
        let d = compare_sets(&before, &after, 0.95);
        let holds = |t: &str| FailIf::parse(t).unwrap().check(&d).unwrap();
        let why = holds("self(hot) > +20%").expect("a 30% faster rate trips +20%");
        assert!(why.contains("regressed") && why.contains('%'), "{why}");
        assert!(holds("self(hot) > +40%").is_none());
        assert!(
            holds("self(hot) > +1pp").is_none(),
            "the share did not move"
        );
        assert!(holds("incl(main) > +20%").is_some());
        assert!(holds("any > +20%").unwrap().contains("cold"));

        // .folded files have no window lengths: a rate threshold says so.
        let folded = |hot: u64| {
            let text = format!("t;main;hot {hot}\nt;main;cold 500\n");
            vec![WindowCounts::of(&Folded::from_folded_text(&text), None)]
        };
        let no_rates = compare_sets(&folded(100), &folded(200), 0.95);
        let e = FailIf::parse("self(hot) > +20%")
            .unwrap()
            .check(&no_rates)
            .unwrap_err();
        assert!(matches!(e, FailIfError::NoRates { .. }), "{e}");
    }
}
