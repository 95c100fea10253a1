// login.html works without this; it only explains a failed attempt.
if (location.search.includes('failed')) {
  const box = document.getElementById('login-error');
  box.textContent = 'Wrong username or password.';
  box.hidden = false;
}
