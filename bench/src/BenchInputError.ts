/**
 * Bad input to a benchmark (a missing file, a file that is not JSON, a bad
 * flag): the harness prints its message alone, without a stack, and exits 2.
 */
export class BenchInputError extends Error {
  override readonly name = 'BenchInputError';
}
