//! Asking before acting: the confirmation of a destructive command, and the approval of
//! a deploy whose changes widen access. A question is asked only on a terminal; without
//! one the command is refused, unless `--yes` answered it beforehand.

use std::io::{BufRead, IsTerminal, Write};

/// The exit code of a command that did nothing because a confirmation or an approval was
/// not given (declined, no terminal to ask on, or a reviewed plan that no longer holds).
pub const NOT_CONFIRMED: u8 = 4;

/// A command refused because it was not confirmed; nothing was done.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotConfirmed(pub String);

/// Asks `question` on the terminal and goes on only on a yes. `yes`: answered already
/// (`--yes`). Without a terminal, refused with `how` (what to pass instead).
pub async fn confirm(yes: bool, question: &str, how: &str) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(NotConfirmed(format!(
            "{question} This needs a confirmation and there is no terminal to ask on, so \
             nothing was done: {how}"
        ))
        .into());
    }
    let prompt = format!("{question} [y/N] ");
    let answer = tokio::task::spawn_blocking(move || {
        let mut err = std::io::stderr();
        let _ = write!(err, "{prompt}");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await??;
    if is_yes(&answer) {
        Ok(())
    } else {
        Err(NotConfirmed("not confirmed: nothing was done".into()).into())
    }
}

fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_y_or_yes_is_a_yes() {
        for a in ["y\n", "Y", " yes \n", "YES"] {
            assert!(is_yes(a), "{a:?}");
        }
        for a in ["", "\n", "n", "no", "yep", "sure"] {
            assert!(!is_yes(a), "{a:?}");
        }
    }

    #[tokio::test]
    async fn a_yes_given_beforehand_is_not_asked() {
        assert!(confirm(true, "Delete?", "pass --yes").await.is_ok());
    }
}
