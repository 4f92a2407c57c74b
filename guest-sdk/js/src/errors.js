// Errors that say whose fault they are.

const KINDS = ['config', 'transient', 'system'];
const LABELS = { config: 'config error', transient: 'transient error', system: 'error' };

/**
 * A connector error. `kind` decides what the operator is told: fix the config (`config`), try
 * again later (`transient`), or report a bug (`system`).
 */
export class SluiceError extends Error {
  constructor(kind, message) {
    if (!KINDS.includes(kind)) throw new TypeError(`unknown error kind ${JSON.stringify(kind)}`);
    super(`${LABELS[kind]}: ${message}`);
    this.name = 'SluiceError';
    this.kind = kind;
    this.detail = String(message);
  }

  static config(message) {
    return new SluiceError('config', message);
  }

  static transient(message) {
    return new SluiceError('transient', message);
  }

  static system(message) {
    return new SluiceError('system', message);
  }
}

/**
 * Runs `fn`, prefixing the message of a `SluiceError` it throws and keeping its kind:
 * `withContext('cannot list accounts', () => accountsPage(config, 1))`.
 */
export function withContext(what, fn) {
  try {
    return fn();
  } catch (e) {
    if (e instanceof SluiceError) throw new SluiceError(e.kind, `${what}: ${e.detail}`);
    throw e;
  }
}
