//! Authenticators: what each adds to a request. Tokens an authenticator has to obtain (OAuth
//! refresh, session logins) are fetched through the host like any request, kept in the engine
//! until they expire, and fetched again after.

use crate::datetime;
use crate::engine::{Engine, Inputs, Scope, kind, plain};
use crate::requester::{self, Answer, Options};
use serde_json::Value;
use sluice_guest::{Error, Result};

/// What an authenticator adds.
#[derive(Default)]
pub struct Credentials {
    pub headers: Vec<(String, String)>,
    pub params: Vec<(String, String)>,
}

/// Refresh a token this long before it expires.
const EXPIRY_MARGIN_SECS: i64 = 60;

/// What the authenticator of `requester` adds to its requests (`ctx`: the request's context).
pub fn credentials(engine: &Engine, requester: &Value, ctx: &Value, path: &str) -> Result<Credentials> {
    authenticate(engine, requester.get("authenticator"), requester, ctx, path)
}

/// A SessionTokenAuthenticator's session token, sent as its `request_authentication` says.
fn session_credentials(engine: &Engine, auth: &Value, ctx: &Value, out: &mut Credentials, path: &str) -> Result<()> {
    let token = session_token(engine, auth, path)?;
    let how = auth
        .get("request_authentication")
        .ok_or_else(|| Error::config(format!("{path}: SessionTokenAuthenticator needs request_authentication")))?;
    match kind(how) {
        "Bearer" | "SessionTokenRequestBearerAuthenticator" => {
            out.headers.push(("Authorization".into(), format!("Bearer {token}")))
        }
        "ApiKey" | "SessionTokenRequestApiKeyAuthenticator" => {
            let option = how
                .get("inject_into")
                .ok_or_else(|| Error::config(format!("{path}.request_authentication: inject_into is required")))?;
            // `api_token` shapes the value (`Token {{ session_token }}`); the token alone by
            // default.
            let value = match how.get("api_token").filter(|t| !t.is_null()) {
                Some(template) => {
                    let ctx = engine.context(how, &Scope::default(), vec![("session_token", Value::from(token))]);
                    engine.text(Some(template), &ctx)?
                }
                None => token,
            };
            inject(engine, option, value, ctx, out, path)?;
        }
        other => return Err(Error::config(format!("{path}.request_authentication: {other} is not supported"))),
    }
    Ok(())
}

fn authenticate(
    engine: &Engine,
    auth: Option<&Value>,
    requester: &Value,
    request_ctx: &Value,
    path: &str,
) -> Result<Credentials> {
    let Some(auth) = auth.filter(|a| !a.is_null() && kind(a) != "NoAuth") else { return Ok(Credentials::default()) };
    let ctx = engine.context(auth, &Scope::default(), Vec::new());
    let mut out = Credentials::default();
    if crate::custom::is_custom_node(auth) {
        return crate::custom::credentials(engine, auth);
    }
    match kind(auth) {
        "NoAuth" => {}
        "BearerAuthenticator" => {
            let token = engine.text(auth.get("api_token"), &ctx)?;
            out.headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        "BasicHttpAuthenticator" => {
            let user = engine.text(auth.get("username"), &ctx)?;
            let password = engine.text(auth.get("password"), &ctx)?;
            out.headers
                .push(("Authorization".into(), format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))));
        }
        "ApiKeyAuthenticator" => {
            let token = engine.text(auth.get("api_token"), &ctx)?;
            match auth.get("inject_into") {
                Some(option) => inject(engine, option, token, &ctx, &mut out, path)?,
                None => {
                    let header = engine.text(auth.get("header"), &ctx)?;
                    if header.is_empty() {
                        return Err(Error::config(format!(
                            "{path}: ApiKeyAuthenticator needs inject_into (or header)"
                        )));
                    }
                    out.headers.push((header, token));
                }
            }
        }
        "OAuthAuthenticator" => {
            let token = oauth_token(engine, auth, &ctx, path)?;
            out.headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        "SessionTokenAuthenticator" => session_credentials(engine, auth, &ctx, &mut out, path)?,
        "SelectiveAuthenticator" => {
            let mut selected = engine.config.value();
            for key in auth.get("authenticator_selection_path").and_then(Value::as_array).into_iter().flatten() {
                selected = selected.get(key.as_str().unwrap_or_default()).unwrap_or(&Value::Null);
            }
            let name = plain(selected);
            let chosen = auth.get("authenticators").and_then(|a| a.get(&name)).ok_or_else(|| {
                Error::config(format!(
                    "{path}: the config selects authenticator {name:?}, which the manifest does not define"
                ))
            })?;
            return authenticate(
                engine,
                Some(chosen),
                requester,
                request_ctx,
                &format!("{path}.authenticators.{name}"),
            );
        }
        "LegacySessionTokenAuthenticator" => {
            // The CDK's api_url is the requester's `url`, else its `url_base`.
            let api_url = match engine.text(requester.get("url"), request_ctx)? {
                url if url.is_empty() => engine.text(requester.get("url_base"), request_ctx)?,
                url => url,
            };
            let token = legacy_session_token(engine, auth, &ctx, &api_url, path)?;
            out.headers.push((engine.text(auth.get("header"), &ctx)?, token));
        }
        other => return Err(Error::config(format!("{path}: {other} is not supported"))),
    }
    Ok(out)
}

fn inject(
    engine: &Engine,
    option: &Value,
    token: String,
    ctx: &Value,
    out: &mut Credentials,
    path: &str,
) -> Result<()> {
    let mut options = Options::default();
    options.inject(engine, option, &Value::from(token), ctx)?;
    if !options.body_json.is_empty() || !options.body_data.is_empty() {
        return Err(Error::config(format!("{path}: an API key can go into a header or a request parameter only")));
    }
    out.headers.extend(options.headers);
    out.params.extend(options.params);
    Ok(())
}

fn cached(engine: &Engine, path: &str) -> Option<String> {
    let now = chrono::Utc::now().timestamp();
    let tokens = engine.tokens.borrow();
    let (token, expires) = tokens.get(path)?;
    expires.is_none_or(|e| now + EXPIRY_MARGIN_SECS < e).then(|| token.clone())
}

fn oauth_token(engine: &Engine, auth: &Value, ctx: &Value, path: &str) -> Result<String> {
    if let Some(token) = cached(engine, path) {
        return Ok(token);
    }
    let endpoint = engine.text(auth.get("token_refresh_endpoint"), ctx)?;
    if endpoint.is_empty() {
        // A fixed token (access_token_value) needs no refresh.
        let token = engine.text(auth.get("access_token_value"), ctx)?;
        if token.is_empty() {
            return Err(Error::config(format!("{path}: OAuthAuthenticator needs token_refresh_endpoint")));
        }
        return Ok(token);
    }
    let grant = engine.text_or(auth.get("grant_type"), ctx, "refresh_token")?;
    // The body's field names, as the manifest may rename them.
    let name_of = |field: &str, default: &str| engine.text_or(auth.get(field), ctx, default);
    // The refresh arguments as the CDK 7.39's `_build_standard_refresh_args` makes them: the client
    // credentials only when no `Authorization` header carries them, the refresh token when the
    // manifest has one, each scope as a `scopes` field, and the body's extra fields after them
    // without replacing any.
    let headers = engine.inputs(auth.get("refresh_request_headers"), ctx, Inputs::Headers)?;
    let mut form = vec![(name_of("grant_type_name", "grant_type")?, grant.clone())];
    if !headers.iter().any(|(k, _)| k == "Authorization") {
        for field in ["client_id", "client_secret"] {
            let v = engine.text(auth.get(field), ctx)?;
            if !v.is_empty() {
                form.push((name_of(&format!("{field}_name"), field)?, v));
            }
        }
    }
    if auth.get("refresh_token").is_some_and(|t| !t.is_null()) || grant == "refresh_token" {
        let token = engine.text(auth.get("refresh_token"), ctx)?;
        if !token.is_empty() {
            form.push((name_of("refresh_token_name", "refresh_token")?, token));
        }
    }
    if let Some(Value::Array(scopes)) = auth.get("scopes") {
        form.extend(scopes.iter().map(|scope| ("scopes".to_string(), plain(scope))));
    }
    for (k, v) in engine.inputs(auth.get("refresh_request_body"), ctx, Inputs::Params)? {
        if !form.iter().any(|(name, _)| *name == k) {
            form.push((k, plain(&v)));
        }
    }
    let mut body = form_urlencoded::Serializer::new(String::new());
    for (k, v) in &form {
        body.append_pair(k, v);
    }
    let as_query = auth.get("send_refresh_request_as_query_params").and_then(Value::as_bool) == Some(true);
    let mut request = match as_query {
        true => {
            let separator = if endpoint.contains('?') { '&' } else { '?' };
            sluice_guest::http::post(format!("{endpoint}{separator}{}", body.finish()))
        }
        false => sluice_guest::http::post(endpoint.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.finish().into_bytes()),
    };
    for (k, v) in headers {
        request = request.header(&k, plain(&v));
    }
    let response = request.send()?;
    if !response.is_success() {
        return Err(Error::config(format!(
            "{path}: refreshing the OAuth token at {endpoint} answered {}: {}",
            response.status,
            String::from_utf8_lossy(&response.body[..response.body.len().min(300)])
        )));
    }
    let answer: Value = response.json()?;
    let name = engine.text_or(auth.get("access_token_name"), ctx, "access_token")?;
    let token = answer
        .get(&name)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::system(format!("{path}: the token endpoint's answer has no {name:?}")))?
        .to_string();
    let expires_name = engine.text_or(auth.get("expires_in_name"), ctx, "expires_in")?;
    let expires = match answer.get(&expires_name) {
        Some(Value::Number(n)) => n.as_f64().map(|s| chrono::Utc::now().timestamp() + s as i64),
        Some(Value::String(s)) => match s.parse::<f64>() {
            Ok(secs) => Some(chrono::Utc::now().timestamp() + secs as i64),
            Err(_) => datetime::parse_any(s).ok().map(|d| d.timestamp()),
        },
        _ => None,
    };
    engine.tokens.borrow_mut().insert(path.to_string(), (token.clone(), expires));
    Ok(token)
}

fn session_token(engine: &Engine, auth: &Value, path: &str) -> Result<String> {
    if let Some(token) = cached(engine, path) {
        return Ok(token);
    }
    let login = auth
        .get("login_requester")
        .ok_or_else(|| Error::config(format!("{path}: SessionTokenAuthenticator needs login_requester")))?;
    let response = match requester::send(
        engine,
        login,
        &Scope::default(),
        &Options::default(),
        &format!("{path}.login_requester"),
        &[],
    )? {
        Answer::Ok(r) => r,
        Answer::Ignored => return Err(Error::config(format!("{path}: the login answer was ignored"))),
        Answer::ResetPagination(error) => return Err(error),
    };
    let answer: Value = response.json()?;
    let mut token = &answer;
    for key in auth.get("session_token_path").and_then(Value::as_array).into_iter().flatten() {
        token = token.get(key.as_str().unwrap_or_default()).unwrap_or(&Value::Null);
    }
    let token = match token {
        Value::String(s) => s.clone(),
        Value::Null => {
            return Err(Error::system(format!("{path}: the login answer has no token at session_token_path")));
        }
        other => other.to_string(),
    };
    let ctx = engine.context(auth, &Scope::default(), Vec::new());
    let expires = match engine.text(auth.get("expiration_duration"), &ctx)? {
        d if d.is_empty() => None,
        d => {
            let duration =
                datetime::parse_duration(&d).map_err(|e| Error::config(format!("{path}.expiration_duration: {e}")))?;
            Some(duration.add_to(&chrono::Utc::now()).timestamp())
        }
    };
    engine.tokens.borrow_mut().insert(path.to_string(), (token.clone(), expires));
    Ok(token)
}

/// The CDK's LegacySessionTokenAuthenticator: the config's `session_token` while
/// `validate_session_url` accepts it (a 401 there means log in instead, any other failure is an
/// error), else a login, `POST` of `{"username", "password"}` as JSON to `login_url`, the token
/// the answer's `session_token_response_key`. Both URLs are the requester's base with the path
/// appended as written. The token is kept for the instance (the CDK keeps a login a day).
fn legacy_session_token(engine: &Engine, auth: &Value, ctx: &Value, api_url: &str, path: &str) -> Result<String> {
    if let Some(token) = cached(engine, path) {
        return Ok(token);
    }
    let header = engine.text(auth.get("header"), ctx)?;
    let given = engine.text(auth.get("session_token"), ctx)?;
    let mut token = None;
    if !given.is_empty() {
        let url = format!("{api_url}{}", engine.text(auth.get("validate_session_url"), ctx)?);
        let response = sluice_guest::http::get(url.clone()).header(&header, &given).send()?;
        match response.status {
            200..=299 => token = Some(given),
            401 => {}
            status => {
                return Err(Error::config(format!(
                    "{path}: error while validating the session token at {url}: it answered {status}"
                )));
            }
        }
    }
    let token = match token {
        Some(token) => token,
        None => {
            let username = engine.text(auth.get("username"), ctx)?;
            let password = engine.text(auth.get("password"), ctx)?;
            if username.is_empty() || password.is_empty() {
                return Err(Error::config(format!(
                    "{path}: invalid credentials: the session token is not valid, or username and password are not given"
                )));
            }
            let url = format!("{api_url}{}", engine.text(auth.get("login_url"), ctx)?);
            let body = serde_json::json!({"username": username, "password": password}).to_string();
            let response = sluice_guest::http::post(url.clone())
                .header("content-type", "application/json")
                .body(body.into_bytes())
                .send()?;
            if !response.is_success() {
                return Err(Error::config(format!(
                    "{path}: the login at {url} answered {}: failed to retrieve a new session token",
                    response.status
                )));
            }
            let answer: Value = response.json()?;
            let key = engine.text(auth.get("session_token_response_key"), ctx)?;
            match answer.get(&key) {
                None | Some(Value::Null) => {
                    return Err(Error::system(format!("{path}: the login answer at {url} has no {key:?}")));
                }
                Some(value) => crate::interpolation::py_str_json(value),
            }
        }
    };
    engine.tokens.borrow_mut().insert(path.to_string(), (token.clone(), None));
    Ok(token)
}

/// Standard base64 with padding (Basic authentication).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_pads() {
        assert_eq!(super::base64(b"demo:demo-password"), "ZGVtbzpkZW1vLXBhc3N3b3Jk");
        assert_eq!(super::base64(b"a"), "YQ==");
        assert_eq!(super::base64(b"ab"), "YWI=");
    }
}
