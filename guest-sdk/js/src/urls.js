// URL helpers for connectors: no host interface needed.

import { SluiceError } from './errors.js';

/** Resolves a link from an API answer (absolute, or a path) against the base URL. */
export function join(baseUrl, link) {
  if (link.startsWith('http://') || link.startsWith('https://')) return link;
  return `${baseUrl.replace(/\/+$/, '')}/${link.replace(/^\/+/, '')}`;
}

/**
 * The `host:port` of a URL, as `Source.hosts` wants it: prefixed with `http://` when the URL is
 * plain http (which the operator must grant explicitly), the scheme's port when none is given. The
 * same answers as the Rust and Python SDKs (guest-sdk/cases/host_port.json).
 */
export function hostPort(url) {
  const at = url.indexOf('://');
  if (at < 0) throw SluiceError.config(`not an absolute URL: ${url}`);
  const scheme = url.slice(0, at);
  let authority = url.slice(at + 3).split(/[/?#]/)[0];
  authority = authority.slice(authority.lastIndexOf('@') + 1);
  if (!authority) throw SluiceError.config(`URL has no host: ${url}`);
  const schemes = { https: ['', 443], http: ['http://', 80] };
  if (!Object.hasOwn(schemes, scheme)) {
    throw SluiceError.config(`unsupported URL scheme ${JSON.stringify(scheme)} in ${url}`);
  }
  const [prefix, defaultPort] = schemes[scheme];
  const colon = authority.lastIndexOf(':');
  if (colon >= 0 && !authority.slice(colon).includes(']')) return `${prefix}${authority}`;
  return `${prefix}${authority}:${defaultPort}`;
}
