//! `${NAME}` substitution in the parsed config's string values, so secrets stay out of the file. It runs
//! after TOML parsing, on values only: a value is data whatever bytes it holds (a `"`, `\` or newline in a
//! secret cannot break the file or add keys), and `${NAME}` in a comment is never read.

use super::ConfigError;

/// Replaces every `${NAME}` (and `${NAME:-default}`) in the string values of `value`, whose field path is
/// `at`. `$$` stands for a literal `$`. `lookup(name, field, whole)` gives a variable's value (`whole`: the
/// reference is the entire value); `None` for an unset variable without a default is an error naming it
/// and the field.
pub fn substitute_values(
    value: &mut toml::Value,
    at: &str,
    lookup: &mut dyn FnMut(&str, &str, bool) -> Option<String>,
) -> Result<(), ConfigError> {
    match value {
        toml::Value::String(s) if s.contains('$') => *s = substitute(s, at, lookup)?,
        toml::Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                substitute_values(v, &format!("{at}[{i}]"), lookup)?;
            }
        }
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                let field = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                substitute_values(v, &field, lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// One string value: `${NAME}`, `${NAME:-default}` and `$$` replaced.
pub fn substitute(
    text: &str,
    at: &str,
    lookup: &mut dyn FnMut(&str, &str, bool) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let whole = text.starts_with("${") && text.find('}') == Some(text.len() - 1);
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| ConfigError::invalid(at, "unterminated ${ (write $$ for a literal $)"))?;
            let expr = &body[..end];
            let (name, default) = match expr.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (expr, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ConfigError::invalid(
                    at,
                    format!("invalid environment variable name {name:?}"),
                ));
            }
            match (lookup(name, at, whole), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => {
                    return Err(ConfigError::invalid(
                        at,
                        format!("environment variable {name} is not set (nor in env_file)"),
                    ))
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// What `prism check` puts in for an unset variable: shaped like the field wants (a whole `*url` value
/// becomes a URL), so the rest of the file can still be checked.
pub fn placeholder(name: &str, field: &str, whole: bool) -> String {
    let key = field.rsplit('.').next().unwrap_or(field);
    match key {
        _ if !whole => format!("unset-{name}"),
        "ws_url" => format!("wss://unset-{}.invalid/", name.to_ascii_lowercase().replace('_', "-")),
        "redis_url" => format!("redis://unset-{}.invalid/", name.to_ascii_lowercase().replace('_', "-")),
        k if k.ends_with("url") => format!("https://unset-{}.invalid/", name.to_ascii_lowercase().replace('_', "-")),
        _ => format!("unset-{name}"),
    }
}
