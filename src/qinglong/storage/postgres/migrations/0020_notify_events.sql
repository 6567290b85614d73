-- Reserved for the notification events of issue 22 (start, success, deadlines); filled in by that work.
SELECT 1;
