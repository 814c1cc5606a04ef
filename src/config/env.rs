//! `${NAME}` substitution in config text, so secrets stay in the environment.

use super::ConfigError;

/// Replaces every `${NAME}` (and `${NAME:-default}`) outside comment lines with the variable's value.
/// `$$` stands for a literal `$`. An unset variable without a default is an error naming it and its line.
pub fn substitute_env(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    for (lineno, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                out.push('$');
                rest = tail;
            } else if let Some(body) = after.strip_prefix('{') {
                let end = body
                    .find('}')
                    .ok_or_else(|| ConfigError::Env(format!("line {}: unterminated ${{ in config", lineno + 1)))?;
                let expr = &body[..end];
                let (name, default) = match expr.split_once(":-") {
                    Some((n, d)) => (n, Some(d)),
                    None => (expr, None),
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(ConfigError::Env(format!(
                        "line {}: invalid environment variable name {name:?}",
                        lineno + 1
                    )));
                }
                match (lookup(name), default) {
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => {
                        return Err(ConfigError::Env(format!(
                            "line {}: environment variable {name} is not set",
                            lineno + 1
                        )))
                    }
                }
                rest = &body[end + 1..];
            } else {
                out.push('$');
                rest = after;
            }
        }
        out.push_str(rest);
    }
    Ok(out)
}
