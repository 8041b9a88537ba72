! Fortran MPI program for parmon's comm tests (use mpi): a ping-pong of 10 messages of 100
! integers between ranks 0 and 1, an allreduce and a bcast. Prints what it did, in the same
! format as mpi_patterns.c ("sent from to messages bytes", "coll rank name sent received").
program mpi_patterns_f
  use mpi
  implicit none
  integer :: ierr, rank, nranks, i, peer
  integer :: buf(100), red(4), status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  buf = rank
  peer = 1 - rank
  do i = 1, 10
    if (rank == 0) then
      call MPI_Send(buf, 100, MPI_INTEGER, peer, 5, MPI_COMM_WORLD, ierr)
      call MPI_Recv(buf, 100, MPI_INTEGER, peer, 5, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_Recv(buf, 100, MPI_INTEGER, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      call MPI_Send(buf, 100, MPI_INTEGER, peer, 5, MPI_COMM_WORLD, ierr)
    end if
  end do
  write (*, '(A,I0,A,I0,A)') 'sent ', rank, ' ', peer, ' 10 4000'
  call MPI_Allreduce(buf, red, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (*, '(A,I0,A)') 'coll ', rank, ' MPI_Allreduce 16 16'
  call MPI_Bcast(buf, 100, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    write (*, '(A,I0,A)') 'coll ', rank, ' MPI_Bcast 400 0'
  else
    write (*, '(A,I0,A)') 'coll ', rank, ' MPI_Bcast 0 400'
  end if
  call MPI_Finalize(ierr)
end program mpi_patterns_f
