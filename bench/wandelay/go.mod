module sluice.local/wandelay

go 1.22
