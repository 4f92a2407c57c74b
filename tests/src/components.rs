//! Hand-made WebAssembly for the hostile suite: components no SDK would build (many memories, a
//! start function that never returns, functions too large or too many to compile), made by
//! appending core modules to a real connector so the result still loads as a connector.

/// `base` (a component) with each of `modules` appended as a core module that is instantiated,
/// with no imports, when the component is.
pub fn with_core_modules(base: &[u8], modules: &[Vec<u8>]) -> Vec<u8> {
    let mut out = base.to_vec();
    for (index, module) in (count_core_modules(base)..).zip(modules) {
        section(&mut out, 1, module);
        // A core instance section with one `instantiate index` and no arguments.
        let mut instance = vec![1, 0x00];
        leb(&mut instance, index);
        instance.push(0);
        section(&mut out, 2, &instance);
    }
    out
}

/// A core module with one memory of `pages` 64 KiB pages.
pub fn memory_module(pages: u32) -> Vec<u8> {
    let mut memory = vec![1, 0x00];
    leb(&mut memory, pages);
    module(&[(5, memory)])
}

/// A core module with `count` empty funcref tables.
pub fn tables_module(count: u32) -> Vec<u8> {
    let mut tables = Vec::new();
    leb(&mut tables, count);
    for _ in 0..count {
        tables.extend_from_slice(&[0x70, 0x00, 0x00]);
    }
    module(&[(4, tables)])
}

/// A core module with nothing in it.
pub fn empty_module() -> Vec<u8> {
    module(&[])
}

/// A core module whose start function loops forever.
pub fn looping_start_module() -> Vec<u8> {
    // loop (block type empty) br 0 end end
    functions_module(1, &[0x03, 0x40, 0x0c, 0x00, 0x0b], Some(0))
}

/// A core module with one function of about `bytes` bytes of code.
pub fn big_function_module(bytes: usize) -> Vec<u8> {
    functions_module(1, &vec![0x01; bytes], None)
}

/// A core module with `count` empty functions.
pub fn many_functions_module(count: u32) -> Vec<u8> {
    functions_module(count, &[], None)
}

/// `count` functions of type `[] -> []`, each with `code` (before the final `end`) and no
/// locals; `start` names a start function.
fn functions_module(count: u32, code: &[u8], start: Option<u32>) -> Vec<u8> {
    let types = vec![1, 0x60, 0, 0];
    let mut funcs = Vec::new();
    leb(&mut funcs, count);
    funcs.extend(std::iter::repeat_n(0u8, count as usize));
    let mut body = vec![0]; // no locals
    body.extend_from_slice(code);
    body.push(0x0b);
    let mut bodies = Vec::new();
    leb(&mut bodies, count);
    for _ in 0..count {
        leb(&mut bodies, body.len() as u32);
        bodies.extend_from_slice(&body);
    }
    let mut sections = vec![(1, types), (3, funcs)];
    if let Some(start) = start {
        let mut s = Vec::new();
        leb(&mut s, start);
        sections.push((8, s));
    }
    sections.push((10, bodies));
    module(&sections)
}

fn module(sections: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"\0asm\x01\0\0\0".to_vec();
    for (id, content) in sections {
        section(&mut out, *id, content);
    }
    out
}

fn section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    leb(out, content.len() as u32);
    out.extend_from_slice(content);
}

fn leb(out: &mut Vec<u8>, mut n: u32) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb(bytes: &[u8], at: &mut usize) -> usize {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let byte = bytes[*at];
        *at += 1;
        n |= ((byte & 0x7f) as usize) << shift;
        if byte < 0x80 {
            return n;
        }
        shift += 7;
    }
}

/// Core modules defined at the top level of a component (the next one's index).
fn count_core_modules(component: &[u8]) -> u32 {
    let (mut at, mut count) = (8, 0);
    while at < component.len() {
        let id = component[at];
        at += 1;
        let size = read_leb(component, &mut at);
        count += u32::from(id == 1);
        at += size;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb_round_trips() {
        for n in [0u32, 1, 127, 128, 300, 1 << 20, u32::MAX] {
            let mut out = Vec::new();
            leb(&mut out, n);
            assert_eq!(read_leb(&out, &mut 0), n as usize);
        }
    }

    #[test]
    fn appended_modules_are_counted() {
        let base = b"\0asm\x0d\0\x01\0".to_vec();
        let one = with_core_modules(&base, &[memory_module(1)]);
        assert_eq!(count_core_modules(&one), 1);
        assert_eq!(count_core_modules(&with_core_modules(&one, &[memory_module(1), looping_start_module()])), 3);
    }
}
