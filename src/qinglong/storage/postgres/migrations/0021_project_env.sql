-- Reserved for project environments and secrets (issue 22); filled in by that work.
SELECT 1;
