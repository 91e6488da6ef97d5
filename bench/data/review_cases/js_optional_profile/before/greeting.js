// The greeting at the top of the dashboard.

function displayName(user) {
  if (user.profile && user.profile.nickname) {
    return user.profile.nickname;
  }
  return user.login;
}

function greeting(user, hour) {
  const part = hour < 12 ? "morning" : hour < 18 ? "afternoon" : "evening";
  return `Good ${part}, ${displayName(user)}!`;
}

module.exports = { displayName, greeting };
