//! Messages for the operator. They appear as LOG messages in the host's output; anything a
//! connector prints to stdout or stderr does too.

use crate::__private::bindings::sluice::connector::log::{Level, log};

pub fn debug(message: impl AsRef<str>) {
    log(Level::Debug, message.as_ref());
}
pub fn info(message: impl AsRef<str>) {
    log(Level::Info, message.as_ref());
}
pub fn warn(message: impl AsRef<str>) {
    log(Level::Warn, message.as_ref());
}
pub fn error(message: impl AsRef<str>) {
    log(Level::Error, message.as_ref());
}
