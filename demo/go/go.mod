module demo-go

go 1.19
