import { BUILD_COMMIT, BUILD_TARGET, VERSION } from '../version';
import { parseCommand } from './args';

export function versionCommand(argv: string[]) {
  parseCommand(argv, {}, 'Usage: cpd version\n\nPrints the version, the commit it was built from and its target platform.');
  console.log(`cpd ${VERSION} (commit ${BUILD_COMMIT}, ${BUILD_TARGET})`);
}
