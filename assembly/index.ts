// Placeholder kernel: the compute-engine issue replaces this with the band-math VM.
export function version(): i32 {
  return 1;
}
