//! The MCP prompt `system-profile`: the Claude Code slash command `commands/system-profile.md`
//! served through `prompts/list` and `prompts/get`. Both come from that one file (compiled in),
//! so the command and the prompt cannot drift.

use serde_json::{json, Value};

/// The slash command, frontmatter and body, as committed.
pub const COMMAND_FILE: &str = include_str!("../../../commands/system-profile.md");

pub const PROMPT_NAME: &str = "system-profile";

/// What the command's body is given in place of `$ARGUMENTS`.
pub const ARGUMENT: &str = "target";

/// The command file split into its frontmatter fields and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandFile<'a> {
    /// `key: value` lines between the `---` fences, values unquoted, in file order.
    pub fields: Vec<(&'a str, &'a str)>,
    pub body: &'a str,
}

impl<'a> CommandFile<'a> {
    /// Split a Claude Code command file. Frontmatter is optional; only flat `key: value`
    /// lines are read (the form Claude Code documents for commands).
    pub fn parse(text: &'a str) -> CommandFile<'a> {
        let Some(rest) = text.strip_prefix("---\n") else {
            return CommandFile {
                fields: Vec::new(),
                body: text,
            };
        };
        let Some(end) = rest.find("\n---\n") else {
            return CommandFile {
                fields: Vec::new(),
                body: text,
            };
        };
        let fields = rest[..end]
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim(), unquote(v.trim())))
            .collect();
        CommandFile {
            fields,
            body: &rest[end + "\n---\n".len()..],
        }
    }

    pub fn field(&self, key: &str) -> Option<&'a str> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
}

/// The `prompts/list` entry.
pub fn listed() -> Value {
    let file = CommandFile::parse(COMMAND_FILE);
    json!({
        "name": PROMPT_NAME,
        "title": "Profile a target (/system-profile)",
        "description": file.field("description").unwrap_or_default(),
        "arguments": [{
            "name": ARGUMENT,
            "description": format!(
                "What to profile, as after /system-profile: {}",
                file.field("argument-hint").unwrap_or_default()
            ),
            "required": false,
        }],
    })
}

/// The `prompts/get` result: the body with `$ARGUMENTS` replaced, as one user message.
pub fn get(target: &str) -> Value {
    let file = CommandFile::parse(COMMAND_FILE);
    json!({
        "description": file.field("description").unwrap_or_default(),
        "messages": [{
            "role": "user",
            "content": { "type": "text", "text": file.body.replace("$ARGUMENTS", target) },
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_body_split() {
        let f = CommandFile::parse(
            "---\ndescription: Do it\nargument-hint: \"<x>\"\n---\nBody $ARGUMENTS\n",
        );
        assert_eq!(f.field("description"), Some("Do it"));
        assert_eq!(f.field("argument-hint"), Some("<x>"));
        assert_eq!(f.body, "Body $ARGUMENTS\n");
        let plain = CommandFile::parse("no frontmatter\n");
        assert!(plain.fields.is_empty());
        assert_eq!(plain.body, "no frontmatter\n");
    }

    #[test]
    fn the_prompt_is_the_command_body_with_the_target() {
        let got = get("train.py gpu");
        let text = got["messages"][0]["content"]["text"].as_str().unwrap();
        assert!(text.contains("**train.py gpu**"));
        assert!(!text.contains("$ARGUMENTS"));
        assert!(!text.starts_with("---"));
        assert_eq!(
            text,
            CommandFile::parse(COMMAND_FILE)
                .body
                .replace("$ARGUMENTS", "train.py gpu")
        );
    }
}
