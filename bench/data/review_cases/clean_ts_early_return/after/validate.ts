// Checks on the sign-up form before it is sent.

const USERNAME = /^[a-z0-9_]+$/;

export function validateUsername(name: string): string | null {
  if (name.length === 0) {
    return "required";
  }
  if (name.length > 32) {
    return "too long";
  }
  if (!USERNAME.test(name)) {
    return "letters, digits and _ only";
  }
  return null;
}
