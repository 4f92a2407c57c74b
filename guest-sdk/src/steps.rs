//! Pages read in steps (contract 0.1.5): a connector's requests sent by the host between two
//! calls, so that no instance waits for an answer (see [`crate::Source::read_step`]).
//!
//! A step runs the page from its start. Each request goes through [`Steps`]: the first requests
//! are answered with what the host got for them in earlier steps; the first one it has no answer
//! for ends the step (its error is passed on with `?`), and the host sends it and calls the next
//! step with its answer too.

use crate::__private::bindings::exports::sluice::connector::stepped_pages as wit;
use crate::__private::bindings::sluice::connector::http as wit_http;
use crate::http::{RecordsResponse, Request, Response, http_error};
use crate::{Error, Result};

/// How a page's requests are sent: now (a page read whole, [`Steps::now`]) or by the host
/// between steps.
pub struct Steps {
    /// `None`: sent now.
    replay: Option<Replay>,
}

struct Replay {
    answers: std::vec::IntoIter<Result<wit::Answer, wit_http::HttpError>>,
    /// The request this step ends with: the first the host has no answer for.
    pending: Option<wit::Outgoing>,
}

impl Steps {
    /// Requests sent at once, in this call: for [`crate::Source::read_page`] of a connector
    /// whose pages are written once, for [`crate::Source::read_step`]:
    /// `fn read_page(c, p, t) -> Result<Page> { Self::read_step(c, p, t, &mut Steps::now()) }`.
    pub fn now() -> Self {
        Steps { replay: None }
    }

    pub(crate) fn replay(answers: Vec<Result<wit::Answer, wit_http::HttpError>>) -> Self {
        Steps { replay: Some(Replay { answers: answers.into_iter(), pending: None }) }
    }

    /// The request the step ends with, if it asked for one the host has not answered.
    pub(crate) fn pending(&mut self) -> Option<wit::Outgoing> {
        self.replay.as_mut().and_then(|r| r.pending.take())
    }

    /// As [`Request::send`].
    pub fn send(&mut self, request: Request) -> Result<Response> {
        let Some(replay) = self.replay.as_mut() else { return request.send() };
        let url = request.url().to_string();
        let answer = replay.answer(request, wit::BodyUse::Whole)?;
        Ok(Response { url, status: answer.status, headers: answer.headers, body: answer.rest })
    }

    /// As [`Request::send_records`].
    pub fn send_records(&mut self, request: Request, path: &[&str]) -> Result<RecordsResponse> {
        let Some(replay) = self.replay.as_mut() else { return request.send_records(path) };
        let url = request.url().to_string();
        let answer = replay.answer(request, wit::BodyUse::Records(keys(path)))?;
        let (status, headers, rest) = (answer.status, answer.headers, answer.rest);
        Ok(RecordsResponse { url, path: path.join("."), status, headers, records: answer.records, rest })
    }

    /// As [`Request::forward_records`]: the host keeps the records for the page.
    pub fn forward_records(&mut self, request: Request, path: &[&str]) -> Result<RecordsResponse<u32>> {
        let Some(replay) = self.replay.as_mut() else { return request.forward_records(path) };
        let url = request.url().to_string();
        let answer = replay.answer(request, wit::BodyUse::Forward(keys(path)))?;
        let (status, headers, rest) = (answer.status, answer.headers, answer.rest);
        Ok(RecordsResponse { url, path: path.join("."), status, headers, records: answer.forwarded, rest })
    }
}

impl Replay {
    /// The host's answer to this request from an earlier step, or the error that ends this step
    /// with it.
    fn answer(&mut self, request: Request, body: wit::BodyUse) -> Result<wit::Answer> {
        if self.pending.is_some() {
            return Err(not_answered());
        }
        let (method, url) = (request.method().to_string(), request.url().to_string());
        match self.answers.next() {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(e)) => Err(http_error(&method, &url, e)),
            None => {
                self.pending = Some(wit::Outgoing { request: request.into_wit().2, body });
                Err(not_answered())
            }
        }
    }
}

fn keys(path: &[&str]) -> Vec<String> {
    path.iter().map(|k| k.to_string()).collect()
}

/// What a request the host has not answered yet gives: passed on with `?`, it ends the step,
/// and the host sends the request before the next one.
fn not_answered() -> Error {
    Error::System("the request is sent by the host before the next step: pass this error on with `?`".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http;

    fn answer(body: &str, records: Option<Vec<String>>) -> wit::Answer {
        wit::Answer { status: 200, headers: vec![], records, forwarded: None, rest: body.as_bytes().to_vec() }
    }

    #[test]
    fn answered_requests_get_their_answers_and_the_first_other_ends_the_step() {
        let records = vec![r#"{"id":1}"#.to_string()];
        let mut steps = Steps::replay(vec![Ok(answer("{}", None)), Ok(answer(r#"{"next":2}"#, Some(records.clone())))]);
        let first = steps.send(http::get("https://api.example.com/count")).unwrap();
        assert_eq!((first.url.as_str(), first.body.as_slice()), ("https://api.example.com/count", &b"{}"[..]));
        let second = steps.send_records(http::get("https://api.example.com/items"), &["data"]).unwrap();
        assert_eq!((second.records, second.path.as_str()), (Some(records), "data"));
        assert!(steps.pending().is_none());
        let third = steps.forward_records(http::get("https://api.example.com/more"), &["data"]);
        assert!(third.unwrap_err().message().contains("pass this error on with `?`"));
        // A request after the unanswered one is not sent instead of it.
        assert!(steps.send(http::get("https://api.example.com/other")).is_err());
        let outgoing = steps.pending().expect("the step ends with the unanswered request");
        assert_eq!(outgoing.request.url, "https://api.example.com/more");
        assert!(matches!(&outgoing.body, wit::BodyUse::Forward(path) if path == &["data"]), "{:?}", outgoing.body);
    }

    #[test]
    fn an_http_error_is_the_error_send_gives() {
        let mut steps = Steps::replay(vec![Err(wit_http::HttpError::Denied("not granted".into()))]);
        let error = steps.send(http::get("https://api.example.com/")).unwrap_err();
        assert_eq!(error, Error::Config("GET https://api.example.com/ denied: not granted".into()));
        assert!(steps.pending().is_none());
    }
}
