//! The XmlDecoder: a body of XML as the dict `xmltodict.parse` makes of it (the CDK's decoder
//! calls it with its defaults), so records and templates see the same values:
//!
//! - the document is `{root_tag: value}`; tags and attribute names are kept as written (a
//!   namespace prefix stays part of the name, `xmlns` declarations are attributes);
//! - an element without attributes or children is its text, stripped, or null when there is none;
//! - otherwise an object: its attributes as `@name`, then its children in order (a tag seen again
//!   turns that key into a list), then its text as `#text` when it has any;
//! - text is every text and CDATA piece directly inside the element, joined and then stripped.
//!
//! A body that is not well-formed XML (or names an entity other than XML's five, which expat
//! refuses without a DTD) is, as in the CDK, one empty document and a warning, not an error.

use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use serde_json::{Map, Value};

/// An element being read: its name, attributes and children so far, and its text pieces.
struct Open {
    name: String,
    fields: Map<String, Value>,
    children: bool,
    text: String,
}

/// The document in `body`, or why it is not XML.
pub fn parse(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8 text: {e}"))?;
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.trim_text(false);
    config.check_end_names = true;
    let mut stack: Vec<Open> = Vec::new();
    let mut document: Option<Value> = None;
    loop {
        let event = reader.read_event().map_err(|e| format!("at byte {}: {e}", reader.error_position()))?;
        match event {
            Event::Start(start) => {
                if document.is_some() && stack.is_empty() {
                    return Err("junk after the document element".into());
                }
                stack.push(open(&start)?);
            }
            Event::Empty(start) => {
                if document.is_some() && stack.is_empty() {
                    return Err("junk after the document element".into());
                }
                let element = open(&start)?;
                close(element, &mut stack, &mut document);
            }
            Event::End(_) => {
                let element = stack.pop().ok_or("a closing tag without its opening tag")?;
                close(element, &mut stack, &mut document);
            }
            Event::Text(piece) => {
                let piece = piece.decode().map_err(|e| e.to_string())?;
                match stack.last_mut() {
                    Some(element) => element.text.push_str(&piece),
                    None if piece.trim().is_empty() => {}
                    None => return Err("text outside the document element".into()),
                }
            }
            Event::CData(piece) => {
                let piece = piece.decode().map_err(|e| e.to_string())?;
                stack.last_mut().ok_or("CDATA outside the document element")?.text.push_str(&piece);
            }
            Event::GeneralRef(reference) => {
                let resolved = match reference.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => c.to_string(),
                    None => {
                        let name = reference.decode().map_err(|e| e.to_string())?;
                        resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("undefined entity &{name};"))?
                            .to_string()
                    }
                };
                stack.last_mut().ok_or("a reference outside the document element")?.text.push_str(&resolved);
            }
            Event::Eof => break,
            // Comments, processing instructions, the declaration and a DOCTYPE add nothing.
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err("the document ends inside an element".into());
    }
    document.ok_or_else(|| "no element found".into())
}

fn open(start: &BytesStart) -> Result<Open, String> {
    let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
    let mut fields = Map::new();
    for attribute in start.attributes() {
        let attribute = attribute.map_err(|e| format!("<{name}>: {e}"))?;
        let key = format!("@{}", String::from_utf8_lossy(attribute.key.as_ref()));
        let value = attribute.unescape_value().map_err(|e| format!("<{name}>: {e}"))?;
        fields.insert(key, Value::String(value.into_owned()));
    }
    Ok(Open { name, fields, children: false, text: String::new() })
}

/// An element's value, given to its parent (or made the document).
fn close(element: Open, stack: &mut [Open], document: &mut Option<Value>) {
    let text = element.text.trim();
    let value = if element.fields.is_empty() && !element.children {
        if text.is_empty() { Value::Null } else { Value::String(text.to_string()) }
    } else {
        let mut fields = element.fields;
        if !text.is_empty() {
            fields.insert("#text".into(), Value::String(text.to_string()));
        }
        Value::Object(fields)
    };
    let Some(parent) = stack.last_mut() else {
        let mut root = Map::new();
        root.insert(element.name, value);
        *document = Some(Value::Object(root));
        return;
    };
    parent.children = true;
    match parent.fields.get_mut(&element.name) {
        Some(Value::Array(items)) => items.push(value),
        Some(existing) => {
            let first = existing.take();
            *existing = Value::Array(vec![first, value]);
        }
        None => {
            parent.fields.insert(element.name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Cases checked against `xmltodict.parse` (the CDK's XmlDecoder) while this was written.
    #[test]
    fn documents_are_the_dicts_xmltodict_makes() {
        let cases = [
            (
                r#"<root><location id="123">
                    San Francisco
                 </location><item id="1" category="books"><name>Book Title 1</name><price>10.99</price></item>
                 <item id="2"><name>Gadget</name><description/></item></root>"#,
                json!({"root": {"location": {"@id": "123", "#text": "San Francisco"}, "item": [
                    {"@id": "1", "@category": "books", "name": "Book Title 1", "price": "10.99"},
                    {"@id": "2", "name": "Gadget", "description": null}]}}),
            ),
            (
                "<?xml version=\"1.0\"?><!-- c --><a>x<b>1</b>y &amp; &#65;<![CDATA[<z>]]></a>",
                json!({"a": {"b": "1", "#text": "xy & A<z>"}}),
            ),
            (
                r#"<ns:list xmlns:ns="urn:x"><ns:e k="v"/><ns:e/><ns:e>t</ns:e></ns:list>"#,
                json!({"ns:list": {"@xmlns:ns": "urn:x", "ns:e": [{"@k": "v"}, null, "t"]}}),
            ),
            ("<empty/>", json!({"empty": null})),
        ];
        for (xml, expected) in cases {
            assert_eq!(parse(xml.as_bytes()).unwrap(), expected, "{xml}");
        }
    }

    #[test]
    fn what_is_not_well_formed_is_refused() {
        for bad in ["", "not xml", "<a><b></a>", "<a/><b/>", "<a>&nope;</a>", "<a>", "</a>"] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} parsed");
        }
    }
}
