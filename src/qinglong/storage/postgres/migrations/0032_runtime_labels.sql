-- `ql task list` and `ql trigger list` show labels (0027_labels): ql_runtime, which lists
-- them (a control replica's role), reads the labels too. It changes none.
GRANT SELECT ON qinglong.task_labels, qinglong.trigger_labels TO ql_runtime;
