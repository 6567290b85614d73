"""The body of the panel's Account page: the user's second factor (docs/security.md#second-
factor). Static markup, no value from the database: ``static/account.js`` fills the elements
by their ids and shows the part that fits the state (off, pending, on). The secret and the
recovery codes are shown once, as text; every field has its ``<label for>``."""

from __future__ import annotations

ACCOUNT = """
<h1>Account</h1>
<p class="muted">How you log in. A second factor asks for the 6-digit code of an
authenticator app after the password; recovery codes stand in for a lost phone, once each.</p>
<p id="problem" class="problem" hidden></p>
<section><h2>Second factor</h2>
<p id="second-state" role="status"></p>
<p id="second-required" class="problem" hidden>Your role must log in with a second factor:
set one up to use the rest of the panel.</p>
<p id="second-session-only" class="muted" hidden>Only a password login can change the second
factor.</p>
<p id="second-off-part" hidden><button type="button" id="second-begin">Set up a second
factor</button> <span id="second-begin-problem" class="problem" role="alert" hidden></span></p>
<div id="second-pending-part" hidden>
<p>Add this account to an authenticator app: type the secret (or give it the
<code>otpauth://</code> URI), then the code the app shows. Shown this once.</p>
<div class="secret-once"><p>Secret: <code id="second-secret"></code></p>
<p>URI: <code id="second-uri"></code></p></div>
<form id="second-confirm" class="inline" autocomplete="off">
<label for="second-confirm-otp">Code from the app <input id="second-confirm-otp" required
  inputmode="numeric" autocomplete="one-time-code" maxlength="6" size="8"
  spellcheck="false"></label>
<button type="submit" id="second-confirm-submit">Turn on</button>
<span id="second-confirm-problem" class="problem" role="alert" hidden></span>
</form></div>
<div id="second-codes-part" class="secret-once" hidden>
<p>Recovery codes: each logs in once instead of a code. They are shown only now and stored
only as digests: keep them somewhere safe.</p>
<ol id="second-codes"></ol></div>
<div id="second-on-part" hidden>
<form id="second-off" class="inline" autocomplete="off">
<label for="second-off-otp">Current code <input id="second-off-otp" inputmode="numeric"
  autocomplete="one-time-code" maxlength="6" size="8" spellcheck="false"></label>
<label for="second-off-recovery">or a recovery code <input id="second-off-recovery"
  size="22" spellcheck="false"></label>
<button type="submit" id="second-off-submit" class="danger">Turn off</button>
<span id="second-off-problem" class="problem" role="alert" hidden></span>
</form></div>
</section>
"""
