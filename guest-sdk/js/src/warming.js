// Whether the SDK is reading the connector's warm-up pages (`Source.warmUp`): that happens while
// the component is built, where no host answers its imports (calling one fails the build), so the
// SDK refuses them with an error that ends the page instead.

import { SluiceError } from './errors.js';

export const warming = { active: false };

export function refuseHost(what) {
  if (warming.active) throw SluiceError.system(`${what}: a warm-up page runs with no host, its steps may only compute`);
}
