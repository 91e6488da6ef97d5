// Checks on the sign-up form before it is sent.

export function validateUsername(name: string): string | null {
  let error: string | null = null;
  if (name.length === 0) {
    error = "required";
  } else {
    if (name.length > 32) {
      error = "too long";
    } else {
      if (!/^[a-z0-9_]+$/.test(name)) {
        error = "letters, digits and _ only";
      }
    }
  }
  return error;
}
