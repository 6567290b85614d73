#!/bin/sh
# A subscribed shell script: its cron line below makes a task and a trigger.
# cron: */3 * * * * *
# name: Greet from a subscribed shell script
echo "greetings from $QL_TASK_ID, scheduled for $QL_SCHEDULED_FOR"
