import { VERSION } from '../version';
import { parseCommand } from './args';

export function versionCommand(argv: string[]) {
  parseCommand(argv, {}, 'Usage: cpd version\n\nPrints the cpd version.');
  console.log(`cpd ${VERSION}`);
}
